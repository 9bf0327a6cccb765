package runtime

// Codes of the runtime's refusals (docs/errors.md); the engine's are in runtime/wasm.
const (
	CodeWorkdir      = "E-RUN-009" // a session's folders cannot be created
	CodeScriptModule = "E-RUN-010" // a script capsule without exactly one module beside its manifest
	CodeTrace        = "E-RUN-012" // a trace write failed: the session fails, events are never dropped
	CodeContextMoved = "E-RUN-014" // a context's files were written on another gateway, whose work_root this one does not share
)

// Stage warnings: a manifest setting this release accepts, so the capsule loads, but does
// not act on (docs/errors.md). Each code stays with its key for good: W-RUN-002
// (context.max_tokens) and W-RUN-003 (inference.compaction) are retired since those keys
// take effect.
const (
	WarnArtifactConfig = "W-RUN-001" // artifacts[].config
	WarnAfterTask      = "W-RUN-005" // lifecycle.after_task
	WarnResourceMemory = "W-RUN-006" // capabilities.resources.memory_bytes
	WarnResourcePids   = "W-RUN-007" // capabilities.resources.pids
	WarnCgroupIO       = "W-RUN-013" // capabilities.resources.cgroup_io_bytes_per_sec
)

// Stage warnings of on-stage hooks (docs/errors.md): a hook's failure or an answer staging
// does not honour is reported, and the capsule still stages, as upstream Murmur does.
const (
	WarnStageHookFailed      = "W-RUN-009" // an on-stage hook answered err, trapped or ran out of time
	WarnStageHookAnswer      = "W-RUN-010" // an on-stage answer not honoured: its case, or its commit_policy
	WarnStageShellNotAllowed = "W-RUN-011" // write-manifests for a binary outside shell.allow
	WarnStageManifest        = "W-RUN-012" // write-manifests content that is not a usable tool manifest
)
