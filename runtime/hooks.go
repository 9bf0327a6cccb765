package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/manifest"
)

// Hook-output cases of murmur:hook/lifecycle@0.9.0 (wit/murmur-hook-0.9.0.wit).
const (
	OutputNone           = "none"
	OutputReplaceContext = "replace-context"
	OutputWriteManifests = "write-manifests"
	OutputArtifact       = "artifact"
	OutputReopenTask     = "reopen-task"
	OutputSeedContext    = "seed-context"
	OutputDeny           = "deny"
)

// HookOutput is a hook's answer: its hook-output case and the case's string, for the
// cases that carry one (deny, reopen-task, artifact).
type HookOutput struct {
	Case string
	Text string
}

// HookGuest runs one hook artifact's lifecycle functions: fn is the export
// (on-tool-call, …) and record the event's murmur:hook record (ToolEventRecord, …). An
// error is the hook's err(string) answer, a trap or a deadline.
type HookGuest interface {
	Call(ctx context.Context, fn string, record any) (HookOutput, error)
}

// Hook is a hook artifact of a session: its own manifest and the guest that answers.
type Hook struct {
	Name     string
	Manifest *manifest.ArtifactManifest
	Guest    HookGuest
	// Deadline bounds one call (the hook role's deadline: 30 s unless
	// limits.deadline_seconds is written).
	Deadline time.Duration
}

// ToolOutcome is murmur:hook's tool-outcome: what a tool call that ran produced.
type ToolOutcome struct {
	OutputBytes uint64
	DurationMS  uint64
	Status      string
}

// ToolEventRecord is murmur:hook's tool-event. Outcome nil is the decision point (the
// call has not run); set, the call ran and is only observed.
type ToolEventRecord struct {
	Turn       uint32
	ToolName   string
	InputBytes uint64
	Input      string
	Outcome    *ToolOutcome
}

// HookSink is the sink that runs a session's hooks on its event stream: each event a
// hook is bound to is handed to it, and the answers its commit_policy allows are applied
// through the event (Event.Deny); every call is recorded as a hook event after the event
// it answered.
type HookSink struct {
	ctx   context.Context
	hooks []*Hook
}

// NewHookSink returns the sink running hooks, calls bounded by ctx and each hook's
// Deadline.
func NewHookSink(ctx context.Context, hooks ...*Hook) *HookSink {
	return &HookSink{ctx: ctx, hooks: hooks}
}

// Event hands e to the blocking hooks bound to it, in manifest order. A hook's failure
// is recorded, never fails the session (upstream's rule outside on-compaction).
func (h *HookSink) Event(e *Event) error {
	fn, record := hookRecord(e)
	if fn == "" {
		return nil
	}
	for _, hk := range h.hooks {
		am := hk.Manifest
		if !am.Binds(fn) || am.ExecutionMode == manifest.ModeAsync {
			continue
		}
		out, rec := h.call(hk, fn, record)
		if out.Case == OutputDeny && rec.Error == "" {
			rec.Reason = out.Text
			if rec.Reason == "" {
				// Upstream: an empty reason still denies, with one naming the defect.
				rec.Reason = fmt.Sprintf("hook %s denied this call without giving a reason", hk.Name)
			}
			rec.Honoured = am.CommitPolicy == manifest.CommitDeny && e.Deny(hk.Name, rec.Reason)
		}
		e.Then(EventHook, rec, nil)
	}
	return nil
}

// call runs one hook call under its deadline and returns the answer and its record.
func (h *HookSink) call(hk *Hook, fn string, record any) (HookOutput, HookCall) {
	ctx, cancel := context.WithTimeout(h.ctx, hk.Deadline)
	defer cancel()
	start := time.Now()
	out, err := hk.Guest.Call(ctx, fn, record)
	rec := HookCall{Hook: hk.Name, Binding: fn, Mode: hk.Manifest.ExecutionMode, Output: out.Case, DurationMS: time.Since(start).Milliseconds()}
	switch {
	case err != nil:
		rec.Output, rec.Error = "error", err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			rec.Error = fmt.Sprintf("no answer within %s: %v", hk.Deadline, err)
		}
	case out.Case == OutputNone:
		rec.Honoured = true
	}
	return out, rec
}

// hookRecord maps a stream event to the lifecycle function bound to it and the record
// that function takes; "" for events no hook answers. Only tool calls are mapped so far.
func hookRecord(e *Event) (string, any) {
	switch e.Type {
	case EventToolProposed:
		d, ok := e.Data.(ToolProposed)
		if !ok {
			return "", nil
		}
		return bindingOf(d.Kind), ToolEventRecord{Turn: uint32(d.Turn), ToolName: d.ToolName, InputBytes: uint64(d.InputBytes), Input: e.Content["input"]}
	case EventToolCall:
		d, ok := e.Data.(ToolCall)
		if !ok {
			return "", nil
		}
		return bindingOf(d.Kind), ToolEventRecord{Turn: uint32(d.Turn), ToolName: d.ToolName, InputBytes: uint64(d.InputBytes), Input: e.Content["input"],
			Outcome: &ToolOutcome{OutputBytes: uint64(d.OutputBytes), DurationMS: uint64(d.DurationMS), Status: d.Status}}
	}
	return "", nil
}

// bindingOf is the binding a tool call of kind answers to: shell commands have their own.
func bindingOf(kind string) string {
	if kind == KindShell {
		return manifest.BindShell
	}
	return manifest.BindToolCall
}

// dispatchGated asks the stream whether a tool call may run before dispatch runs it: a
// denied call is not run, its tool_call event says denied, and the model is shown the
// hook's reason as the call's error result.
func (s *session) dispatchGated(ctx context.Context, t *task, call agentBlock) (string, bool) {
	kind := s.toolKind(call.Name)
	input := string(call.Input)
	_, v, _ := s.stream.Ask(EventToolProposed, t.parent(), ToolProposed{Turn: t.turn, ToolName: call.Name, Kind: kind, InputBytes: len(input)},
		map[string]string{"input": input})
	if !v.Denied {
		return s.dispatch(ctx, t, call)
	}
	s.toolCalls.Add(1)
	s.stream.Emit(EventToolCall, t.parent(), ToolCall{Turn: t.turn, ToolName: call.Name, Kind: kind, InputBytes: len(input), Status: StatusDenied}, nil)
	return deniedText(call.Name, v), true
}

// StatusDenied is a tool_call's status when a hook refused it before it ran.
const StatusDenied = "denied"

// deniedText is what the model is shown for a refused call: the hook's reason, verbatim.
func deniedText(tool string, v Verdict) string {
	return fmt.Sprintf("the call of %s was refused by hook %s: %s", tool, v.By, strings.TrimSpace(v.Reason))
}
