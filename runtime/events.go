package runtime

import (
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/runtime/shell"
)

// Event types of the session stream (docs/reference/trace.md "Events").
const (
	EventSessionStart  = "session_start"
	EventTaskStart     = "task_start"
	EventToolCall      = "tool_call"
	EventNetworkDenied = "network_denied"
	EventTaskEnd       = "task_end"
	EventSessionEnd    = "session_end"
	// EventToolProposed is a decision point: a tool call the model asked for, before it
	// runs; a sink may refuse it (Event.Deny), and the loop asks through Stream.Ask.
	EventToolProposed = "tool_call_proposed"
	// EventHook is one hook call and its answer, sent right after the event it answered.
	EventHook = "hook"
	// EventArtifact is one call of the capsule's artifact manager (list, describe,
	// search, pull, remove, diagnostics), from a guest or from the model.
	EventArtifact = "artifact_manager"
)

// ArtifactCall records one call of the artifact manager (EventArtifact).
type ArtifactCall struct {
	Op      string `json:"op"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// Status is ok, refused (a not-granted or not-removable answer, or bytes that failed
	// their check) or error (anything else: a registry down, a store failing).
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
	Registry   string `json:"registry,omitempty"`
	From       string `json:"from"` // guest or model
	DurationMS int64  `json:"duration_ms"`
}

// Event is one thing that happened in a session. Data is the event's own fields (a
// struct from this file); Content holds inputs and outputs, kept only when the trace
// captures content.
type Event struct {
	Type      string
	ID        string
	ParentID  string // "" only for session_start
	SessionID string
	Time      time.Time
	Data      any
	Content   map[string]string

	verdict *Verdict // non-nil only on an event sent by Ask
	then    []*Event // sent to every sink right after this one (Then)
}

// Verdict is what the sinks decided of an event sent by Stream.Ask.
type Verdict struct {
	Denied bool
	Reason string // shown to the model
	By     string // who refused: a hook artifact's name
	// Reopen is the message a hook reopened an ended task with; "" when none did.
	Reopen string
}

// ReopenTask asks that the task whose end e is be reopened with msg as its next user
// turn, on behalf of by; the first request stands. It reports whether e is a decision
// point at all.
func (e *Event) ReopenTask(by, msg string) bool {
	if e.verdict == nil {
		return false
	}
	if e.verdict.Reopen == "" {
		e.verdict.Reopen, e.verdict.By = msg, by
	}
	return true
}

// Deny refuses what the event proposes, with reason, on behalf of by; the first denial
// stands. It reports whether the event is a decision point at all.
func (e *Event) Deny(by, reason string) bool {
	if e.verdict == nil {
		return false
	}
	if !e.verdict.Denied {
		*e.verdict = Verdict{Denied: true, Reason: reason, By: by}
	}
	return true
}

// Then queues an event the stream sends to every sink right after e, as e's child: how
// a sink records what it did (a hook's answer) in the same ordered stream without
// emitting from inside a delivery.
func (e *Event) Then(typ string, data any, content map[string]string) {
	e.then = append(e.then, &Event{Type: typ, ID: ids.New("evt_"), ParentID: e.ID, SessionID: e.SessionID, Time: time.Now(), Data: data, Content: content})
}

// ToolProposed is a tool call before it runs (EventToolProposed); the input is the
// event's content "input", always handed to the sinks, kept in the trace only with
// trace.capture: content.
type ToolProposed struct {
	Turn       int    `json:"turn"`
	ToolName   string `json:"tool_name"`
	Kind       string `json:"kind"`
	InputBytes int    `json:"input_bytes"`
	// shell is what a shell call would run, for on-shell hooks; the trace keeps only
	// the fields above.
	shell *shell.Command
}

// HookCall records one hook call (EventHook): which hook answered which event, its
// answer, and whether the host honoured it.
type HookCall struct {
	Hook    string `json:"hook"`
	Binding string `json:"binding"`
	Mode    string `json:"execution_mode"`
	// Answers is the id of the event an async hook answered: its answer is recorded
	// later, under the event the sink saw when it arrived.
	Answers    string `json:"answers,omitempty"`
	Output     string `json:"output"` // the hook-output case, "error", or "dropped"
	Reason     string `json:"reason,omitempty"`
	Honoured   bool   `json:"honoured"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// SessionStart opens a session.
type SessionStart struct {
	Capsule       string   `json:"capsule"`
	Version       string   `json:"version"`
	ContextID     string   `json:"context_id,omitempty"`
	Model         string   `json:"model,omitempty"`
	MaxTurns      int      `json:"max_turns,omitempty"`
	ToolsDeclared []string `json:"tools_declared"`
	SandboxTier   string   `json:"sandbox_tier"`
	Grants        Grant    `json:"grants"`
}

// TaskStart opens a task.
type TaskStart struct {
	TaskID     string `json:"task_id"`
	ContextID  string `json:"context_id"`
	Source     string `json:"source"`
	InputBytes int    `json:"input_bytes"`
	// parent is the span context the task runs under (TaskRequest.Trace), for the span
	// sink; the trace file does not keep it.
	parent trace.SpanContext
}

// ToolCall records one tool call.
type ToolCall struct {
	Turn        int    `json:"turn"`
	ToolName    string `json:"tool_name"`
	Kind        string `json:"kind"`
	InputBytes  int    `json:"input_bytes"`
	OutputBytes int    `json:"output_bytes"`
	Status      string `json:"status"`
	DurationMS  int64  `json:"duration_ms"`
	Trap        string `json:"trap,omitempty"`
	// Origin is "runtime" for a tool the capsule pulled while it ran.
	Origin string `json:"origin,omitempty"`
	// CallID is the model's id of the call (none for a guest's invoke).
	CallID string `json:"tool_call_id,omitempty"`
}

// NetworkDenied records a refused connection.
type NetworkDenied struct {
	Who   string `json:"who"`
	Host  string `json:"host"`
	Port  int    `json:"port"`
	Check string `json:"rule_check"`
}

// TaskEnd closes a task.
type TaskEnd struct {
	TaskID     string `json:"task_id"`
	State      string `json:"state"`
	Turns      int    `json:"turns"`
	DurationMS int64  `json:"duration_ms"`
	// reopenable says an on-task-end hook may reopen the task (hooks.go).
	reopenable bool
	// receipt is the task's receipt with what the meters measured; the receipt sink
	// completes it from the task's events (receipt.go).
	receipt *Receipt
}

// SessionEnd closes a session.
type SessionEnd struct {
	Tasks      int    `json:"tasks"`
	ToolCalls  int    `json:"tool_calls"`
	Denials    int    `json:"network_denials"`
	ExitStatus string `json:"exit_status"`
	DurationMS int64  `json:"duration_ms"`
	// shellCalls counts the shell commands among ToolCalls, for session-end hooks.
	shellCalls int
}

// Sink receives a session's events, in order. An error fails the session.
type Sink interface {
	Event(e *Event) error
}

// Stream is a session's one event stream: the runtime emits, sinks (trace, metrics,
// progress, later SSE and hooks) consume; nothing calls a sink directly.
type Stream struct {
	sessionID string
	sinks     []Sink

	mu  sync.Mutex
	err error
}

// NewStream returns the stream of session id feeding sinks.
func NewStream(id string, sinks ...Sink) *Stream { return &Stream{sessionID: id, sinks: sinks} }

// Emit sends an event of type typ under parent and returns its id. After a sink failed,
// Emit returns that failure and sends nothing more.
func (s *Stream) Emit(typ, parent string, data any, content map[string]string) (string, error) {
	e := &Event{Type: typ, ID: ids.New("evt_"), ParentID: parent, SessionID: s.sessionID, Time: time.Now(), Data: data, Content: content}
	return e.ID, s.send(e)
}

// Ask sends a decision-point event like Emit and returns what the sinks decided of it
// (Event.Deny): the loop learns a hook's verdict from the stream, never from the hook.
func (s *Stream) Ask(typ, parent string, data any, content map[string]string) (string, Verdict, error) {
	e := &Event{Type: typ, ID: ids.New("evt_"), ParentID: parent, SessionID: s.sessionID, Time: time.Now(), Data: data, Content: content,
		verdict: &Verdict{}}
	err := s.send(e)
	s.mu.Lock()
	v := *e.verdict
	s.mu.Unlock()
	return e.ID, v, err
}

// send delivers e to every sink, then the events the sinks queued under it (Then), in
// the order they were queued.
func (s *Stream) send(e *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for queue := []*Event{e}; len(queue) > 0; queue = queue[1:] {
		if s.err != nil {
			return s.err
		}
		ev := queue[0]
		for _, sink := range s.sinks {
			if err := sink.Event(ev); err != nil {
				s.err = err
				return err
			}
		}
		queue = append(queue, ev.then...)
	}
	return nil
}

// Attach adds a sink for a while (an SSE subscriber of one task) and returns the function
// that removes it again.
func (s *Stream) Attach(sink Sink) (detach func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Sinks may be func types, which do not compare: remove by the wrapper's identity.
	w := &attached{sink}
	s.sinks = append(s.sinks[:len(s.sinks):len(s.sinks)], w)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		kept := make([]Sink, 0, len(s.sinks))
		for _, k := range s.sinks {
			if a, ok := k.(*attached); !ok || a != w {
				kept = append(kept, k)
			}
		}
		s.sinks = kept
	}
}

// attached is a sink added by Attach.
type attached struct{ Sink }

// Err returns the first sink failure, if any.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
