package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/shell"
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
	// QueueDepth is an async hook's queue length; 0 is DefaultHookQueue.
	QueueDepth int
}

// DefaultHookQueue is how many events an async hook's queue holds before on_overflow
// applies.
const DefaultHookQueue = 64

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

// ShellOutcome is murmur:hook's shell-outcome: what a shell command that ran wrote. The
// streams are their first ShellOutputCap bytes; the byte counts are their full sizes.
type ShellOutcome struct {
	ExitCode                 int32
	Stdout, Stderr           string
	StdoutBytes, StderrBytes uint64
	DurationMS               uint64
}

// ShellOutputCap is how much of each output stream an on-shell hook is shown.
const ShellOutputCap = shell.OutputCap

// ShellEventRecord is murmur:hook's shell-event: Binary is the resolved path when the
// sandbox found it (else the name called), Command the input's command, Argv what is
// executed and Script the command an interpreter runs. Outcome nil is the decision point;
// set, the command ran. Recipe stays none: shell tools here take commands, not recipes.
type ShellEventRecord struct {
	Turn            uint32
	Binary, Command string
	Argv            []string
	Script, Recipe  *string
	Outcome         *ShellOutcome
}

// SessionContextRecord is murmur:hook's session-context. Capabilities names the
// session's grants as "network:<host>" and "env:<NAME>", never values.
type SessionContextRecord struct {
	CapsuleName, CapsuleVersion, SessionID, Model string
	Capabilities                                  []string
}

// TaskStartRecord is murmur:hook's task-start-event; the token figures are 0 ("not
// computed"), as upstream allows.
type TaskStartRecord struct {
	TaskID, ContextID, Source                            string
	InputBytes, BudgetTokens, ContextWindow, PriorTokens uint64
}

// InferenceRecord is murmur:hook's inference-event; Decision is the turn's stop reason
// and ToolName its first tool call, if any. Prompt, output and tools stay none.
type InferenceRecord struct {
	Turn                      uint32
	InputTokens, OutputTokens uint64
	Decision                  string
	ToolName                  *string
}

// HookMessage is murmur:hook's message as the host hands it: a role and its text.
type HookMessage struct{ Role, Content string }

// CompactionRecord is murmur:hook's compaction-event: the messages the summary replaces,
// the input tokens that reached the threshold, and the summarisation call's settings.
type CompactionRecord struct {
	Messages            []HookMessage
	SessionTokens       uint64
	Threshold           float64
	Model, SystemPrompt *string
}

// TaskEndRecord is murmur:hook's task-end-event.
type TaskEndRecord struct{ TaskID, ExitStatus string }

// SessionEndRecord is murmur:hook's session-end-event; the totals this release does
// not keep per session (turns, tokens) are 0.
type SessionEndRecord struct {
	TotalTurns                          uint32
	TotalInputTokens, TotalOutputTokens uint64
	TotalToolCalls, TotalShellCalls     uint32
	DurationMS                          uint64
	ExitStatus                          string
}

// HookSink is the sink that runs a session's hooks on its event stream: each event a
// hook is bound to is handed to it, and the answers its commit_policy allows are applied
// through the event (Event.Deny); every call is recorded as a hook event after the event
// it answered.
type HookSink struct {
	ctx    context.Context
	hooks  []*Hook
	queues map[*Hook]chan asyncCall

	wg    sync.WaitGroup
	once  sync.Once
	mu    sync.Mutex
	done  []HookCall // async answers not yet recorded in the stream
	ended bool
}

// asyncCall is one event waiting in an async hook's queue.
type asyncCall struct {
	fn, answers string
	record      any
}

// NewHookSink returns the sink running hooks, calls bounded by ctx and each hook's
// Deadline. Each async hook gets one worker and an ordered queue, drained at
// session_end (or Close).
func NewHookSink(ctx context.Context, hooks ...*Hook) *HookSink {
	h := &HookSink{ctx: ctx, hooks: hooks, queues: map[*Hook]chan asyncCall{}}
	for _, hk := range hooks {
		if hk.Manifest.ExecutionMode != manifest.ModeAsync {
			continue
		}
		q := make(chan asyncCall, cmp.Or(hk.QueueDepth, DefaultHookQueue))
		h.queues[hk] = q
		h.wg.Add(1)
		go h.worker(hk, q)
	}
	return h
}

// worker is an async hook's one instance: it answers the queued events in order. It
// never touches the stream (the stream may be waiting on this queue); its answers are
// recorded by the next event the sink sees.
func (h *HookSink) worker(hk *Hook, q <-chan asyncCall) {
	defer h.wg.Done()
	for c := range q {
		_, rec := h.call(hk, c.fn, c.record)
		rec.Answers = c.answers
		h.mu.Lock()
		h.done = append(h.done, rec)
		h.mu.Unlock()
	}
}

// Close drains every async queue and waits for its worker; session_end does it too.
func (h *HookSink) Close() {
	h.once.Do(func() {
		h.mu.Lock()
		h.ended = true
		h.mu.Unlock()
		for _, q := range h.queues {
			close(q)
		}
		h.wg.Wait()
	})
}

// Event hands e to the hooks bound to it, in manifest order: blocking hooks are called
// now, async ones get it queued. A hook's failure is recorded, never fails the session
// (upstream's rule outside on-compaction).
func (h *HookSink) Event(e *Event) error {
	if e.Type == EventHook {
		return nil
	}
	fn, record := hookRecord(e)
	for _, hk := range h.hooks {
		am := hk.Manifest
		if fn == "" || !am.Binds(fn) {
			continue
		}
		if am.ExecutionMode == manifest.ModeAsync {
			h.enqueue(e, hk, asyncCall{fn: fn, answers: e.ID, record: record})
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
		if out.Case == OutputReopenTask && rec.Error == "" {
			rec.Reason = out.Text
			if rec.Reason == "" {
				rec.Reason = fmt.Sprintf("hook %s reopened this task without a message", hk.Name)
			}
			end, _ := e.Data.(TaskEnd)
			rec.Honoured = am.CommitPolicy == manifest.CommitReopenTask && end.reopenable && e.ReopenTask(hk.Name, rec.Reason)
		}
		e.Then(EventHook, rec, nil)
	}
	if e.Type == EventSessionEnd {
		h.Close()
	}
	h.mu.Lock()
	done := h.done
	h.done = nil
	h.mu.Unlock()
	for _, rec := range done {
		e.Then(EventHook, rec, nil)
	}
	return nil
}

// enqueue puts c on hk's queue; when it is full, on_overflow says: drop the event
// (recorded as a hook event answering it with output "dropped") or block the stream
// until the worker makes room. An async hook's deny is never honoured: its answer
// comes after the fact.
func (h *HookSink) enqueue(e *Event, hk *Hook, c asyncCall) {
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	if ended {
		return // nothing after the drain: the worker is gone
	}
	q := h.queues[hk]
	// session_end is never dropped: the drain waits for the queue anyway.
	if hk.Manifest.OnOverflow == manifest.OverflowBlock || e.Type == EventSessionEnd {
		q <- c
		return
	}
	select {
	case q <- c:
	default:
		e.Then(EventHook, HookCall{Hook: hk.Name, Binding: c.fn, Mode: manifest.ModeAsync, Output: "dropped", Answers: c.answers,
			Error: fmt.Sprintf("the hook's queue of %d was full (on_overflow: drop)", cap(q))}, nil)
	}
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
// that function takes; "" for events no hook answers (on-compaction has no event on the
// stream yet; on-stage is called at staging, before any stream: stagehooks.go).
func hookRecord(e *Event) (string, any) {
	switch d := e.Data.(type) {
	case SessionStart:
		caps := []string{}
		for _, h := range d.Grants.Network {
			caps = append(caps, "network:"+h)
		}
		for _, n := range d.Grants.Env {
			caps = append(caps, "env:"+n)
		}
		return manifest.BindSessionStart, SessionContextRecord{CapsuleName: d.Capsule, CapsuleVersion: d.Version, SessionID: e.SessionID, Model: d.Model, Capabilities: caps}
	case TaskStart:
		return manifest.BindTaskStart, TaskStartRecord{TaskID: d.TaskID, ContextID: d.ContextID, Source: d.Source, InputBytes: uint64(d.InputBytes)}
	case Inference:
		r := InferenceRecord{Turn: uint32(d.Turn), InputTokens: uint64(d.InputTokens), OutputTokens: uint64(d.OutputTokens), Decision: d.StopReason}
		if len(d.Tools) > 0 {
			r.ToolName = &d.Tools[0]
		}
		return manifest.BindInference, r
	case TaskEnd:
		return manifest.BindTaskEnd, TaskEndRecord{TaskID: d.TaskID, ExitStatus: d.State}
	case SessionEnd:
		return manifest.BindSessionEnd, SessionEndRecord{TotalToolCalls: uint32(d.ToolCalls), TotalShellCalls: uint32(d.shellCalls),
			DurationMS: uint64(d.DurationMS), ExitStatus: d.ExitStatus}
	case ShellRun:
		if d.ran == nil {
			return "", nil // a native tool's command: on-tool-call answers it
		}
		r := d.ran.res
		rec := shellRecord(d.ran.turn, r.Planned)
		rec.Outcome = &ShellOutcome{ExitCode: int32(r.ExitCode), Stdout: clipUTF8(r.Stdout, ShellOutputCap), Stderr: clipUTF8(r.Stderr, ShellOutputCap),
			StdoutBytes: uint64(r.StdoutBytes), StderrBytes: uint64(r.StderrBytes), DurationMS: uint64(r.Duration.Milliseconds())}
		return manifest.BindShell, rec
	}
	switch e.Type {
	case EventToolProposed:
		d, ok := e.Data.(ToolProposed)
		if !ok {
			return "", nil
		}
		if d.Kind == KindShell {
			// Without a sandbox (the call will be refused unrun) there is no plan: the
			// name called and the input as it came.
			cmd := shell.Command{Binary: d.ToolName, Text: e.Content["input"]}
			if d.shell != nil {
				cmd = *d.shell
			}
			return manifest.BindShell, shellRecord(d.Turn, cmd)
		}
		return manifest.BindToolCall, ToolEventRecord{Turn: uint32(d.Turn), ToolName: d.ToolName, InputBytes: uint64(d.InputBytes), Input: e.Content["input"]}
	case EventToolCall:
		d, ok := e.Data.(ToolCall)
		if !ok || d.Kind == KindShell {
			return "", nil // a shell command that ran is answered at its shell event
		}
		return manifest.BindToolCall, ToolEventRecord{Turn: uint32(d.Turn), ToolName: d.ToolName, InputBytes: uint64(d.InputBytes), Input: e.Content["input"],
			Outcome: &ToolOutcome{OutputBytes: uint64(d.OutputBytes), DurationMS: uint64(d.DurationMS), Status: d.Status}}
	}
	return "", nil
}

// shellRecord is the shell-event of cmd, run or about to run at turn, without outcome.
func shellRecord(turn int, cmd shell.Command) ShellEventRecord {
	rec := ShellEventRecord{Turn: uint32(turn), Binary: cmp.Or(cmd.Path, cmd.Binary), Command: cmd.Text, Argv: cmd.Argv}
	if rec.Argv == nil {
		rec.Argv = []string{}
	}
	if cmd.Script != "" {
		rec.Script = &cmd.Script
	}
	return rec
}

// clipUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence: a wasm hook's
// string must be valid UTF-8.
func clipUTF8(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// StatusDenied is a tool_call's status when a hook refused it before it ran.
const StatusDenied = "denied"

// compactionHooks are the sink's blocking hooks bound to on-compaction, in manifest
// order; an async hook is never asked (its answer would come after the compaction).
func (h *HookSink) compactionHooks() []*Hook {
	var out []*Hook
	for _, hk := range h.hooks {
		if hk.Manifest.ExecutionMode != manifest.ModeAsync && hk.Manifest.Binds(manifest.BindCompaction) {
			out = append(out, hk)
		}
	}
	return out
}

// hookSummariser is the summariser of the on-compaction hooks in sinks (the session's
// HookSinks), or nil when none is bound: each is called in order with the messages
// being replaced, and the first whose commit_policy is replace-context and that answers
// replace-context writes the summary (its messages' text). One that answers none leaves
// it to the next, then to the driver; one that fails fails the compaction, and the task.
func (s *session) hookSummariser(sinks []Sink) summariser {
	type bound struct {
		sink *HookSink
		hook *Hook
	}
	var hooks []bound
	for _, k := range sinks {
		if h, ok := k.(*HookSink); ok {
			for _, hk := range h.compactionHooks() {
				hooks = append(hooks, bound{h, hk})
			}
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	return func(ctx context.Context, t *task, in compactionInput) (string, int, bool, error) {
		rec := CompactionRecord{SessionTokens: uint64(in.Tokens), Threshold: in.Threshold, Model: &in.Model}
		if in.System != "" {
			rec.SystemPrompt = &in.System
		}
		rec.Messages = hookMessages(in.Messages)
		for _, bh := range hooks {
			out, call := bh.sink.call(bh.hook, manifest.BindCompaction, rec)
			takes := bh.hook.Manifest.CommitPolicy == manifest.CommitReplaceContext && out.Case == OutputReplaceContext && call.Error == ""
			call.Honoured = call.Honoured || takes
			s.stream.Emit(EventHook, t.parent(), call, nil)
			if call.Error != "" {
				return "", 0, false, fmt.Errorf("on-compaction hook %s failed: %s", bh.hook.Name, call.Error)
			}
			if takes {
				return out.Text, 0, true, nil
			}
		}
		return "", 0, false, nil
	}
}
