package abi

import (
	"fmt"
	"strings"
)

// Hook lifecycle names: the exported interface of murmur:hook@0.9.0
// (wit/murmur-hook-0.9.0.wit) and the prefix of its exports' core names.
const (
	HookInterface = "murmur:hook/lifecycle"
	HookExport09  = HookInterface + "@0.9.0#"
)

// HookOutputCases are hook-output's case names, in WIT order (the lifted discriminant
// indexes them).
var HookOutputCases = []string{"none", "replace-context", "write-manifests", "artifact", "reopen-task", "seed-context", "deny"}

var (
	hookMessage = Record(F("role", String), F("content", String), F("id", optString), F("source-id", optString),
		F("inserted-by", OptionOf(Enum("replace-context", "seed-context")))).Named("message")
	hookToolManifest = Record(F("binary-name", String), F("content", String)).Named("tool-manifest")

	// HookOutputType is murmur:hook/lifecycle's hook-output variant.
	HookOutputType = VariantOf(C("none", nil), C("replace-context", List(hookMessage)), C("write-manifests", List(hookToolManifest)),
		C("artifact", String), C("reopen-task", String), C("seed-context", List(hookMessage)), C("deny", String)).Named("hook-output")

	// Records of the lifecycle functions, in WIT field order.
	StageEventType     = Record(F("shell-allow", List(String))).Named("stage-event")
	SessionContextType = Record(F("capsule-name", String), F("capsule-version", String), F("session-id", String), F("model", String),
		F("capabilities", List(String))).Named("session-context")
	TaskStartEventType = Record(F("task-id", String), F("context-id", String), F("source", String), F("input-bytes", U64),
		F("budget-tokens", U64), F("context-window", U64), F("prior-tokens", U64)).Named("task-start-event")
	TaskEndEventType   = Record(F("task-id", String), F("exit-status", String)).Named("task-end-event")
	InferenceEventType = Record(F("turn", U32), F("input-tokens", U64), F("output-tokens", U64), F("decision", String),
		F("tool-name", optString), F("prompt", optString), F("output", optString), F("tools", optString)).Named("inference-event")
	ToolOutcomeType = Record(F("output-bytes", U64), F("duration-ms", U64), F("status", String)).Named("tool-outcome")
	ToolEventType   = Record(F("turn", U32), F("tool-name", String), F("input-bytes", U64), F("input", String),
		F("outcome", OptionOf(ToolOutcomeType))).Named("tool-event")
	ShellOutcomeType = Record(F("exit-code", S32), F("stdout", String), F("stderr", String), F("stdout-bytes", U64),
		F("stderr-bytes", U64), F("duration-ms", U64)).Named("shell-outcome")
	ShellEventType = Record(F("turn", U32), F("binary", String), F("command", String), F("argv", List(String)),
		F("script", optString), F("recipe", optString), F("outcome", OptionOf(ShellOutcomeType))).Named("shell-event")
	CompactionEventType = Record(F("messages", List(hookMessage)), F("session-tokens", U64), F("threshold", Float64),
		F("model", optString), F("system-prompt", optString)).Named("compaction-event")
	SessionEndEventType = Record(F("total-turns", U32), F("total-input-tokens", U64), F("total-output-tokens", U64),
		F("total-tool-calls", U32), F("total-shell-calls", U32), F("duration-ms", U64), F("exit-status", String)).Named("session-end-event")
)

// HookFuncs are the lifecycle functions by name (on-tool-call, …): each takes its event
// record and returns result<hook-output, string>.
var HookFuncs = map[string]*Func{}

func init() {
	res := []*Type{ResultOf(HookOutputType, String)}
	for fn, rec := range map[string]*Type{
		"on-stage": StageEventType, "on-session-start": SessionContextType, "on-task-start": TaskStartEventType, "on-inference": InferenceEventType,
		"on-tool-call": ToolEventType, "on-shell": ShellEventType, "on-compaction": CompactionEventType,
		"on-task-end": TaskEndEventType, "on-session-end": SessionEndEventType,
	} {
		HookFuncs[fn] = NewFunc([]*Type{rec}, res)
	}
}

// ToHookOutput converts a lifted result<hook-output, string>: the case name and its
// string (deny, artifact, reopen-task), or the guest's err string as failed. The cases
// carrying lists give their contents as text, blank-line separated; write-manifests'
// binary names are only in HookManifests, which callers honouring it use.
func ToHookOutput(v any) (kind, text string, failed bool, err error) {
	r, ok := v.(Result)
	if !ok {
		return "", "", false, valueErr(ResultOf(HookOutputType, String), "got %T", v)
	}
	if r.Err {
		s, ok := r.Value.(string)
		if !ok {
			return "", "", false, valueErr(String, "got %T", r.Value)
		}
		return "", s, true, nil
	}
	o, ok := r.Value.(Variant)
	if !ok || o.Case >= uint32(len(HookOutputCases)) {
		return "", "", false, valueErr(HookOutputType, "got %v", r.Value)
	}
	kind = HookOutputCases[o.Case]
	switch v := o.Value.(type) {
	case string:
		text = v
	case []any:
		// replace-context and seed-context carry messages: text is their contents,
		// blank-line separated.
		var parts []string
		for _, m := range v {
			if f, ok := m.([]any); ok && len(f) > 1 {
				if c, ok := f[1].(string); ok {
					parts = append(parts, c)
				}
			}
		}
		text = strings.Join(parts, "\n\n")
	}
	return kind, text, false, nil
}

// ToolManifest is murmur:hook's tool-manifest: the packed tool manifest (murmur.yaml
// text) a hook writes for shell binary BinaryName.
type ToolManifest struct {
	BinaryName string
	Content    string
}

// HookManifests returns the tool manifests of a lifted result<hook-output, string> that
// answered write-manifests, in the guest's order; nil for any other answer.
func HookManifests(v any) ([]ToolManifest, error) {
	r, ok := v.(Result)
	if !ok || r.Err {
		return nil, nil
	}
	o, ok := r.Value.(Variant)
	if !ok || o.Case >= uint32(len(HookOutputCases)) || HookOutputCases[o.Case] != "write-manifests" {
		return nil, nil
	}
	list, ok := o.Value.([]any)
	if !ok {
		return nil, valueErr(List(hookToolManifest), "got %T", o.Value)
	}
	out := make([]ToolManifest, len(list))
	for i, e := range list {
		f, ok := e.([]any)
		if !ok || len(f) != 2 {
			return nil, valueErr(hookToolManifest, "got %v", e)
		}
		name, ok1 := f[0].(string)
		content, ok2 := f[1].(string)
		if !ok1 || !ok2 {
			return nil, valueErr(hookToolManifest, "got %v", e)
		}
		out[i] = ToolManifest{BinaryName: name, Content: content}
	}
	return out, nil
}

// HookExportName is the core export name of lifecycle function fn at version.
func HookExportName(version, fn string) string {
	return fmt.Sprintf("%s@%s#%s", HookInterface, version, fn)
}
