package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// laterRelease names the release that will honour a key staged with a warning; no
// release is planned for any of them yet.
const laterRelease = "a later release"

// keyFate is what this release does with one manifest key path.
type keyFate struct {
	// code is the stage warning drawn when the key is written; "" when the key takes
	// effect.
	code string
	// under is, for a key inside an unhonoured mapping, that mapping: its one warning
	// covers the key.
	under string
	// ignored says what the runtime does instead of honouring the key, for the warning.
	ignored string
}

// manifestKeys is the fate of every key path the manifest parser accepts
// (manifest.KeyPaths): it takes effect, or staging a manifest that writes it draws one
// warning. TestEveryManifestKeyHasAFate fails when the parser accepts a key that is not
// here, so no key is accepted without deciding what becomes of it.
var manifestKeys = map[string]keyFate{
	"name":                                             {},
	"version":                                          {},
	"artifacts":                                        {},
	"artifacts[].name":                                 {},
	"artifacts[].version":                              {},
	"artifacts[].runtime":                              {}, // runtime: hook runs as a hook (hookguest.go)
	"artifacts[].source":                               {},
	"artifacts[].gateway":                              {},
	"artifacts[].gateway.endpoint":                     {},
	"artifacts[].gateway.api_key":                      {},
	"artifacts[].config":                               {code: WarnArtifactConfig, ignored: "no artifact is handed its config"},
	"artifacts[].capabilities":                         {}, // a hook's grants (hookguest.go, hookscope.go)
	"artifacts[].init_snapshot":                        {}, // the engine's snapshot policy (session.go snapshotPolicy)
	"artifacts[].capabilities.task_io":                 {},
	"artifacts[].capabilities.task_io.read":            {},
	"artifacts[].capabilities.conversation":            {},
	"artifacts[].capabilities.conversation.read":       {},
	"artifacts[].capabilities.env":                     {},
	"artifacts[].capabilities.env.allow":               {},
	"artifacts[].capabilities.limits":                  {},
	"artifacts[].capabilities.limits.memory_bytes":     {},
	"artifacts[].capabilities.limits.deadline_seconds": {},
	"capabilities":                                     {},
	"capabilities.network":                             {},
	"capabilities.network.allow":                       {},
	"capabilities.filesystem":                          {},
	"capabilities.filesystem.scope":                    {},
	"capabilities.shell":                               {},
	"capabilities.install":                             {}, // runtime pulls (artifacts.go)
	"capabilities.install.tool":                        {},
	"capabilities.install.skill":                       {},
	"capabilities.shell.allow":                         {},
	"capabilities.shell.strip_env":                     {},
	"capabilities.shell.min_tier":                      {},
	"capabilities.env":                                 {},
	"capabilities.env.allow":                           {},
	"capabilities.limits":                              {},
	"capabilities.limits.memory_bytes":                 {},
	"capabilities.limits.deadline_seconds":             {},
	"capabilities.resources":                           {},
	"capabilities.resources.processes":                 {},
	"capabilities.resources.open_files":                {},
	"capabilities.resources.file_size_bytes":           {},
	"capabilities.resources.cpu_seconds":               {},
	"capabilities.resources.address_space_bytes":       {},
	"capabilities.resources.memory_bytes": {code: WarnResourceMemory,
		ignored: "a shell or native tool's memory is bounded by capabilities.resources.address_space_bytes (RLIMIT_AS) only"},
	"capabilities.resources.cgroup_memory_bytes": {}, // the session's cgroup (shelltools.go)
	"capabilities.resources.cgroup_pids_max":     {},
	"capabilities.resources.cgroup_cpu_percent":  {},
	"capabilities.resources.cgroup_io_bytes_per_sec": {code: WarnCgroupIO,
		ignored: "the session's cgroup bounds memory, processes and CPU, not disk I/O"},
	"capabilities.resources.pids": {code: WarnResourcePids,
		ignored: "shell and native tools are bounded by capabilities.resources.processes (RLIMIT_NPROC) only"},
	"capabilities.harness":                {}, // a process driver's harness needs are checked against it (process.go)
	"capabilities.harness.paths":          {},
	"capabilities.harness.paths[].path":   {},
	"capabilities.harness.paths[].access": {},
	"inference":                           {},
	"inference.transport":                 {},
	"inference.driver":                    {},
	"inference.driver.artifact":           {},
	"inference.driver.config":             {},
	"inference.model":                     {},
	"inference.endpoint":                  {},
	"inference.api_key":                   {},
	"inference.max_turns":                 {},
	"inference.max_tokens":                {},
	"inference.system_prompt":             {},
	"inference.system_prompt_file":        {},
	"inference.system_prompt_artifact":    {},
	"inference.compaction":                {}, // with context.max_tokens (compaction.go)
	"inference.compaction.threshold":      {},
	"inference.compaction.model":          {},
	"inference.compaction.system_prompt":  {},
	"inference.compaction.dump_summaries": {},
	"lifecycle":                           {},
	"lifecycle.task_acceptance":           {},
	"lifecycle.after_task": {code: WarnAfterTask,
		ignored: "a capsule hosted in the gateway stays staged between tasks, and caddy capsule run ends after its task, whatever it says"},
	"lifecycle.queue_depth":        {},
	"lifecycle.input_timeout_secs": {},
	"lifecycle.max_task_reopens":   {}, // on-task-end reopen-task (task.go)
	"lifecycle.conversation":       {},
	"context":                      {},
	"context.max_tokens":           {}, // the budget compaction fires against
	"trace":                        {},
	"trace.capture":                {},
	"observability":                {},
	"observability.otel_endpoint":  {}, // the gateway exports the capsule's spans there (caddymodule/otel.go)
	// The gateway reads the a2a section (caddymodule: the card, Inputs); the runtime its
	// outputs (outputs.go). caddy capsule run, outside A2A, gives a task text only.
	"a2a":                       {},
	"a2a.input_modes":           {},
	"a2a.output_modes":          {},
	"a2a.max_file_bytes":        {},
	"a2a.max_message_bytes":     {},
	"a2a.outputs":               {},
	"a2a.outputs[].file":        {},
	"a2a.outputs[].name":        {},
	"a2a.outputs[].description": {},
	"a2a.outputs[].media_type":  {},
	"a2a.outputs[].as":          {},
	// Peers (peers.go): the model's send_message and the guests' murmur:message/send;
	// the gateway reads exports (caddymodule: a2a.Config.AcceptPeers).
	"peers":                          {},
	"peers[].name":                   {},
	"peers[].url":                    {},
	"peers[].description":            {},
	"exports":                        {},
	"exports.peer_tasks":             {},
	"exports.peer_tasks.accept":      {},
	"capabilities.limits.peer_depth": {},
	"capabilities.limits.peer_calls": {},
}

// stageWarnings lists what m asks for that this release does not do: one warning per
// unhonoured key written (naming every place it is written), in code order.
func stageWarnings(m *manifest.Manifest) []*errs.Error {
	var out []*errs.Error
	for key, f := range manifestKeys {
		if f.code == "" || f.under != "" {
			continue
		}
		at := m.Written(key)
		if len(at) == 0 {
			continue
		}
		w := errs.New(f.code, "runtime",
			fmt.Sprintf("accepted but not acted on by this release: %s; %s will honour it", f.ignored, laterRelease),
			"remove it to silence this warning, or keep it for the release that honours it")
		w.Pos, w.Path = m.Position(at[0]), strings.Join(at, ", ")
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *errs.Error) int { return strings.Compare(a.Code, b.Code) })
	return out
}
