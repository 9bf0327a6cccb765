package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// invokeAt runs a declared wasm tool for task t and records it under the task's current
// turn (none outside an agent loop).
func (s *session) invokeAt(ctx context.Context, t *task, name string, in abi.ToolInput) (abi.ToolResult, error) {
	mod, origin := s.staged.Modules[name], ""
	if mod == nil || mod.Role != string(manifest.RoleTool) {
		// Not declared: perhaps a tool the capsule pulled while it ran, as this turn read
		// the pins (the model's calls), else as the store holds them now (a guest's invoke).
		pulled, err := s.turnPulled[name], error(nil)
		if pulled == nil {
			pulled, err = s.staged.artifacts.tool(ctx, name)
		}
		if err != nil {
			s.unknownCall(t, name, value(in.Data))
			return abi.ToolResult{}, fmt.Errorf("tool-registry: %s: %w", name, err)
		}
		if pulled == nil {
			s.unknownCall(t, name, value(in.Data))
			return abi.ToolResult{}, fmt.Errorf("tool-registry: no wasm tool named %q is declared in the manifest (declared: %s)", name, strings.Join(s.toolNames(), ", "))
		}
		mod, origin = pulled.mod, OriginRuntime
	}
	start := time.Now()
	out, err := murmur.CallTool(ctx, s.rt.engine, mod, s.grants(name, manifest.RoleTool), s.imports(t, name), in)
	s.toolCalls.Add(1)
	rec := ToolCall{Turn: t.turnNo(), ToolName: name, Kind: KindWasm, InputBytes: len(value(in.Data)), OutputBytes: len(value(out.Data)),
		Status: out.Status.String(), DurationMS: time.Since(start).Milliseconds(), Origin: origin, CallID: callIDOf(ctx)}
	var ge *wasm.GuestError
	if errors.As(err, &ge) {
		rec.Status, rec.Trap = "error", ge.Reason
	} else if err != nil {
		rec.Status = "error"
	}
	s.stream.Emit(EventToolCall, t.parent(), rec, map[string]string{"input": value(in.Data), "output": value(out.Data)})
	return out, err
}

// callIDKey carries the model's id of the tool call being dispatched, for its record.
type callIDKey struct{}

func callIDOf(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// unknownCall counts and records a call of a name that resolves to no tool: the caller
// answers it with an error, but the trace and the totals still show it was asked for.
func (s *session) unknownCall(t *task, name, input string) {
	s.toolCalls.Add(1)
	s.stream.Emit(EventToolCall, t.parent(), ToolCall{Turn: t.turnNo(), ToolName: name, Kind: KindUnknown,
		InputBytes: len(input), Status: "error"}, map[string]string{"input": input})
}

func value(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *session) toolNames() []string {
	var names []string
	for n, m := range s.staged.Modules {
		if m.Role == string(manifest.RoleTool) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

// Tool kinds, as a tool_call event's kind names them (docs/reference/trace.md "tool_call").
const (
	KindNative  = "native"
	KindShell   = "shell"
	KindSkill   = "skill"
	KindWasm    = "wasm"
	KindUnknown = "unknown"
	// KindManager is the artifact manager's own tools (artifact_pull, …), offered to the
	// model of a capsule holding an install grant.
	KindManager = "artifact_manager"
)

// OriginRuntime is a tool_call's origin for a tool the capsule pulled while it ran.
const OriginRuntime = "runtime"

// kindRank is the dispatch precedence: a lower rank wins when one name is declared as
// several kinds (docs/reference/driver-protocol.md "Dispatch").
var kindRank = map[string]int{KindNative: 0, KindShell: 1, KindSkill: 2, KindWasm: 3, KindManager: 4, KindPeer: 5}

// toolKind says which of the capsule's tools a call named name runs: the first match
// in the order native, shell, skill, wasm; KindUnknown when the name is none of them.
func (s *session) toolKind(name string) string {
	if s.shell != nil {
		if _, ok := s.shell.natives[name]; ok {
			return KindNative
		}
	}
	if slices.Contains(s.staged.Manifest.Capabilities.Shell.Allow, name) {
		return KindShell
	}
	for _, a := range s.staged.Artifacts {
		if a.Name == name && a.Role == manifest.RoleSkill {
			return KindSkill
		}
	}
	if mod := s.staged.Modules[name]; mod != nil && mod.Role == string(manifest.RoleTool) {
		return KindWasm
	}
	if s.staged.artifacts.granted() && managerToolNames[name] {
		return KindManager
	}
	if name == toolSendMessage && s.offersPeers() {
		return KindPeer
	}
	if s.turnPulled[name] != nil {
		return KindWasm // a tool the capsule pulled while it ran
	}
	return KindUnknown
}

// dispatch runs one tool call by its kind (toolKind), and returns the text the model
// sees and whether it is an error. Every call, an unknown name included, is counted and
// written as a tool_call event.
func (s *session) dispatch(ctx context.Context, t *task, call agentBlock) (string, bool) {
	ctx = context.WithValue(ctx, callIDKey{}, call.ID)
	switch s.toolKind(call.Name) {
	case KindNative:
		return s.runShellTool(ctx, t, call, s.shell.natives[call.Name])
	case KindShell:
		return s.runShellTool(ctx, t, call, "")
	case KindSkill:
		return s.runSkill(t, call)
	case KindWasm:
		if mod := s.staged.Modules[call.Name]; (mod == nil || mod.Role != string(manifest.RoleTool)) && s.turnPulled[call.Name] != nil {
			// A tool the capsule pulled while it ran: its results reach the model marked.
			pin := s.turnPulled[call.Name].pin
			return s.runWasmTool(ctx, t, call, runtimeMark(pin.Name, pin.Version))
		}
		return s.runWasmTool(ctx, t, call, "")
	case KindManager:
		return s.runManagerTool(ctx, t, call)
	case KindPeer:
		return s.runPeerTool(ctx, t, call)
	}
	names := make([]string, 0, 8)
	for _, tool := range s.offeredTools() {
		names = append(names, tool.Name)
	}
	if len(names) == 0 {
		names = append(names, "none")
	}
	s.unknownCall(t, call.Name, string(call.Input))
	return fmt.Sprintf("no tool named %q is declared in the manifest (declared: %s)", call.Name, strings.Join(names, ", ")), true
}

// runWasmTool calls a wasm tool for the model; mark, when set, begins the text the
// model sees (a runtime-pulled tool's origin).
func (s *session) runWasmTool(ctx context.Context, t *task, call agentBlock, mark string) (string, bool) {
	input := string(call.Input)
	if input == "" {
		input = "{}"
	}
	out, err := s.invokeAt(ctx, t, call.Name, abi.ToolInput{Data: &input})
	if err != nil {
		return err.Error(), true
	}
	text := value(out.Data)
	if text == "" {
		text = value(out.Summary)
	}
	if mark != "" {
		text = mark + "\n" + text
	}
	return text, out.Status != abi.StatusPassed
}

// runSkill answers a call of a skill with its text.
func (s *session) runSkill(t *task, call agentBlock) (string, bool) {
	for _, a := range s.staged.Artifacts {
		if a.Name != call.Name || a.Role != manifest.RoleSkill {
			continue
		}
		text, err := skillText(a)
		s.toolCalls.Add(1)
		rec := ToolCall{Turn: t.turnNo(), ToolName: call.Name, Kind: KindSkill, OutputBytes: len(text), Status: "passed", CallID: call.ID}
		if err != nil {
			rec.Status = "error"
		}
		s.stream.Emit(EventToolCall, t.parent(), rec, map[string]string{"output": text})
		if err != nil {
			return "skill " + call.Name + ": " + err.Error(), true
		}
		return text, false
	}
	return "skill " + call.Name + " is not staged", true // toolKind found it: never reached
}

// skillText is a skill's text, from its local source or its archive's skill.md.
func skillText(a registry.Resolved) (string, error) {
	if a.Text != nil {
		return string(a.Text), nil
	}
	text, err := a.Archive.ReadFile(a.Archive.Payload().Path)
	return string(text), err
}

// dispatchGated asks the stream whether a tool call may run before dispatch runs it: a
// denied call is not run, its tool_call event says denied, and the model is shown the
// hook's reason as the call's error result.
func (s *session) dispatchGated(ctx context.Context, t *task, call agentBlock) (string, bool) {
	kind := s.toolKind(call.Name)
	input := string(call.Input)
	proposed := ToolProposed{Turn: t.turnNo(), ToolName: call.Name, Kind: kind, InputBytes: len(input)}
	if kind == KindShell && s.shell != nil {
		// Worked out as RunShell will run it, so an on-shell hook judges the real argv.
		cmd, _ := s.shell.sb.Plan(call.Name, call.Input)
		proposed.shell = &cmd
	}
	_, v, _ := s.stream.Ask(EventToolProposed, t.parent(), proposed, map[string]string{"input": input})
	if !v.Denied {
		return s.dispatch(ctx, t, call)
	}
	s.toolCalls.Add(1)
	if kind == KindShell {
		s.shellCalls.Add(1)
	}
	s.stream.Emit(EventToolCall, t.parent(), ToolCall{Turn: t.turnNo(), ToolName: call.Name, Kind: kind, InputBytes: len(input), Status: StatusDenied, CallID: call.ID}, nil)
	return deniedText(call.Name, v), true
}

// deniedText is what the model is shown for a refused call: the hook's reason, verbatim.
func deniedText(tool string, v Verdict) string {
	return fmt.Sprintf("the call of %s was refused by hook %s: %s", tool, v.By, strings.TrimSpace(v.Reason))
}
