package manifest

import (
	"fmt"
	"slices"
)

// Bindings of a hook: the lifecycle event it answers (docs/reference/manifest.md
// "The artifact manifest"). A hook that names none answers every session event.
const (
	BindStage        = "on-stage"
	BindSessionStart = "on-session-start"
	BindTaskStart    = "on-task-start"
	BindInference    = "on-inference"
	BindToolCall     = "on-tool-call"
	BindShell        = "on-shell"
	BindCompaction   = "on-compaction"
	BindTaskEnd      = "on-task-end"
	BindSessionEnd   = "on-session-end"
)

// Execution modes, commit policies and overflow rules of a hook.
const (
	ModeBlocking = "blocking"
	ModeAsync    = "async"

	CommitNone           = "none"
	CommitWriteManifests = "write-manifests"
	CommitReplaceContext = "replace-context"
	CommitReopenTask     = "reopen-task"
	CommitDeny           = "deny"

	OverflowDrop  = "drop"
	OverflowBlock = "block"
)

func init() {
	enums["artifact.binding"] = []string{BindStage, BindSessionStart, BindTaskStart, BindInference, BindToolCall, BindShell, BindCompaction, BindTaskEnd, BindSessionEnd}
	enums["artifact.execution_mode"] = []string{ModeBlocking, ModeAsync}
	enums["artifact.commit_policy"] = []string{CommitNone, CommitWriteManifests, CommitReplaceContext, CommitReopenTask, CommitDeny}
	enums["artifact.on_overflow"] = []string{OverflowDrop, OverflowBlock}
}

// policyBindings are the bindings at which each commit policy other than none can take
// effect; any other pairing is refused, as upstream refuses it.
var policyBindings = map[string][]string{
	CommitWriteManifests: {BindStage},
	CommitReplaceContext: {BindCompaction},
	CommitReopenTask:     {BindTaskEnd},
	CommitDeny:           {BindToolCall, BindShell},
}

// Binds reports whether the hook answers event binding b: it names b, or names none.
func (a *ArtifactManifest) Binds(b string) bool { return a.Binding == "" || a.Binding == b }

// hookKeys checks the hook keys of an artifact manifest: their words, that only a hook
// has them, and the pairings of binding, execution_mode, commit_policy and on_overflow.
func (v *validator) hookKeys(a *ArtifactManifest) {
	v.enum("binding", "artifact.binding", a.Binding)
	v.enum("execution_mode", "artifact.execution_mode", a.ExecutionMode)
	v.enum("commit_policy", "artifact.commit_policy", a.CommitPolicy)
	v.enum("on_overflow", "artifact.on_overflow", a.OnOverflow)
	if len(v.d.errs) > 0 {
		return
	}
	if a.Runtime != RoleHook {
		for _, k := range []string{"binding", "execution_mode", "commit_policy", "on_overflow"} {
			if v.has(k) {
				v.fail(k, CodeHookPairing, fmt.Sprintf("%s is a hook's key, and this artifact's runtime is %q", k, a.Runtime), "remove it, or set runtime: hook")
			}
		}
		return
	}
	mode, policy := a.ExecutionMode, a.CommitPolicy
	if mode == "" {
		mode = ModeBlocking
	}
	if policy == "" {
		policy = CommitNone
	}
	switch {
	case a.Binding == BindStage && mode == ModeAsync:
		v.fail("execution_mode", CodeHookPairing, "an on-stage hook must be blocking: staging waits for its answer", "remove execution_mode, or write blocking")
	case mode == ModeAsync && policy != CommitNone:
		v.fail("commit_policy", CodeHookPairing, fmt.Sprintf("an async hook runs after the fact and cannot commit %s", policy), "write commit_policy: none, or execution_mode: blocking")
	case policy != CommitNone && !slices.Contains(policyBindings[policy], a.Binding):
		bound := a.Binding
		if bound == "" {
			bound = "every event (no binding)"
		}
		v.fail("commit_policy", CodeHookPairing, fmt.Sprintf("commit_policy %s takes effect only at %v, and the hook is bound to %s", policy, policyBindings[policy], bound),
			fmt.Sprintf("bind the hook to one of %v, or write commit_policy: none", policyBindings[policy]))
	case v.has("on_overflow") && mode != ModeAsync:
		v.fail("on_overflow", CodeHookPairing, "on_overflow is for async hooks: a blocking hook has no queue", "remove on_overflow, or write execution_mode: async")
	}
}
