package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
)

// StateCanceled ends a task its client canceled.
const StateCanceled = "canceled"

// EventChunk carries text a task streams as it works: a guest's murmur:stream/events
// chunks and each model turn's text. SSE subscribers read it; the trace leaves it out,
// since the inference and task_end events already hold the text.
const EventChunk = "chunk"

// Chunk is the data of an EventChunk.
type Chunk struct {
	TaskID   string `json:"task_id"`
	Text     string `json:"text"`
	Thinking bool   `json:"thinking,omitempty"`
	// Note marks progress that is not answer text: a reopened task's next turn.
	Note bool `json:"note,omitempty"`
}

// TaskRequest is one task for a session: the CLI's --task, or an A2A message.
type TaskRequest struct {
	TaskID, ContextID string // generated when empty
	// Principal is who the task belongs to ("" anonymous): a hosted capsule keeps one
	// session per principal and context, so equal context ids of two principals never
	// share a session.
	Principal string
	Source    string // "cli", "a2a" or "task_md"
	Text      string
	// MessageID is the client's id of the message that brought the task; "" outside A2A.
	MessageID string
	// Parts are every part of that message in order when it holds more than text (files,
	// data); nil when Text is all of it. Guests find them in the workdir's in/.
	Parts []Part
	// History holds the earlier turns of a threaded conversation, oldest first.
	History []Turn
	// Sink receives this task's events while it runs (an SSE subscriber); nil for none.
	Sink Sink
	// RequestInput asks the A2A client for input (murmur:task/task); nil outside A2A. The
	// answer's message replaces the task's in in/ (docs/reference/guest-abi.md "Message
	// parts"); the guest gets its text.
	RequestInput func(ctx context.Context, prompt string) (Answer, error)
	// Trace is the span context the task runs under: its invoke_agent span is a child of
	// it (invalid: a trace of its own).
	Trace trace.SpanContext
	// CapsuleURL is the capsule's public A2A URL as this task's client reached it; its
	// guests see it as MURMUR_CAPSULE_URL (docs/reference/guest-abi.md "Environment").
	// Empty outside the gateway.
	CapsuleURL string
	// Peer is where the task comes from when another capsule's task sent it (zero for a
	// client's task): its chain bounds the task's own peer messages.
	Peer PeerOrigin
	// Previous is the mark the context's task before this one left on the context's
	// folder and the gateway it ran on, when another gateway of a fleet ran it: the task
	// runs only where that folder is (a work_root every gateway shares), else it fails
	// with E-RUN-014 (docs/operators.md "Running several gateways").
	Previous Previous
	// Budget is the task's share of its principal's model-token budget (nil: none): the
	// budget sink reports every turn's tokens to it, and a task that needs another
	// turn once the budget is spent ends failed (E-RUN-022).
	Budget Budget
	// Egress, when Narrowed, narrows the task's network reach to these rules as well as
	// the capsule's own: its guests, driver, shell tools and peer messages reach only
	// what both allow (the caller's policy; docs/reference/a2a.md "Policy").
	Egress   netpolicy.Rules
	Narrowed bool
}

// Previous is what a context's task before this one left, on another gateway.
type Previous struct {
	Mark, Gateway string
}

// Answer is an A2A client's answer to a task's request for input: its message.
type Answer struct {
	Text, MessageID string
	Parts           []Part // every part when it holds more than text; nil otherwise
}

// Turn is one finished task of a threaded conversation.
type Turn struct {
	User, Agent string
	Thread
}

// Thread is what an agent task leaves for the next task of its threaded context
// (docs/reference/driver-protocol.md "Continuation").
type Thread struct {
	// Messages is the task's conversation as the driver protocol's messages (JSON): its
	// user message, each assistant message with its tool calls, each tool result, the
	// final answer. Empty for a turn kept without them: User and Agent then stand for it.
	Messages json.RawMessage
	// Continuation is the driver's continuation_id after the task's last turn; "" for none.
	Continuation string
	// ContinuationBy is the driver that issued it (artifact@version): another driver, after
	// a reload, gets the whole conversation instead.
	ContinuationBy string
	// Compacted says Messages is the whole conversation as the task's last compaction
	// left it (the summary, the messages kept, what followed), not the task's own
	// messages: the next task starts from it, without the earlier turns' messages the
	// summary replaced.
	Compacted bool
}

// task is one task as it runs: passed down the loop, dispatch and chunk code, so that
// nothing of it lives on the session that runs it.
type task struct {
	id  string
	evt string // its task_start event: parent of its turns
	// turn is the agent loop's current turn (0 outside it); turnEvt that turn's
	// inference event, parent of the turn's tool calls.
	turnMu  sync.Mutex // the turn is read by calls a harness makes through the bridge, and by the proxy's denials
	turn    int
	turnEvt string
	// thread is what a completed agent task leaves for the next (Thread).
	thread Thread
	// narrow is the task's narrowed reach (TaskRequest.Egress), nil when not narrowed.
	narrow *netpolicy.Rules
	// requestInput asks the task's A2A client for input; nil outside A2A.
	requestInput func(ctx context.Context, prompt string) (string, error)
	// scope is what the hooks may read of the task (hookscope.go).
	scope hookScope
	// mark is where the session's meters stood at task_start, usage what the guest meter
	// counted over the task's runs so far (receipt.go).
	mark  usageMark
	usage wasm.Usage
	// principal is who the task runs for, peer where it comes from, trace the span
	// context it runs under (TaskRequest's); peerCalls counts its peer messages, and
	// relayed is what its peers answered beyond text, given to its client with its
	// outputs (peers.go).
	principal string
	peer      PeerOrigin
	trace     trace.SpanContext
	peerCalls atomic.Int32
	relayed   []Artifact
}

// parent is the event a tool call or denial of the task hangs under: the current model
// turn, or the task outside the agent loop.
func (t *task) parent() string {
	t.turnMu.Lock()
	defer t.turnMu.Unlock()
	if t.turnEvt != "" {
		return t.turnEvt
	}
	return t.evt
}

// turnNo is the agent loop's current turn (0 outside it).
func (t *task) turnNo() int {
	t.turnMu.Lock()
	defer t.turnMu.Unlock()
	return t.turn
}

// setTurn starts turn n; its event is set by setTurnEvt once written.
func (t *task) setTurn(n int) {
	t.turnMu.Lock()
	t.turn = n
	t.turnMu.Unlock()
}

// setTurnEvt makes evt the parent of what the current turn does.
func (t *task) setTurnEvt(evt string) {
	t.turnMu.Lock()
	t.turnEvt = evt
	t.turnMu.Unlock()
}

// TaskOutcome is how a task ended.
type TaskOutcome struct {
	TaskID string
	State  string // completed, failed, canceled or max_turns_reached
	Result string // the answer, or "error: …" when the task did not complete
	Turns  int
	// Thread is the conversation of an agent task that completed; zero otherwise.
	Thread Thread
	// Artifacts are what a completed task left for its A2A client beyond Result, and
	// Reply is ReplyMessage when the client is to be answered with a Message
	// (docs/reference/guest-abi.md "Artifacts").
	Artifacts []Artifact
	Reply     string
	// Session and Layout name the session the task ran in and its folders.
	Session string
	Layout  *Layout
	// Mark is what the task left on its context's folder ("" when the folder holds no
	// files): the next task of the context on another gateway looks for it there.
	Mark string
	// Receipt is what the task cost and touched (docs/reference/receipts.md).
	Receipt *Receipt
}

// run runs one task of the session to its end: task_start, the script capsule's module or
// the agent loop, the result file, task_end. The only task loop there is: the CLI and the
// gateway both come through here.
func (s *session) run(ctx context.Context, req TaskRequest) TaskOutcome {
	if req.TaskID == "" {
		req.TaskID = ids.New("tsk_")
	}
	if req.ContextID == "" {
		req.ContextID = ids.New("ctx_")
	}
	if req.Sink != nil {
		defer s.stream.Attach(req.Sink)()
	}
	if req.Budget != nil {
		defer s.stream.Attach(&budgetSink{ctx: ctx, budget: req.Budget})()
	}
	start := time.Now()
	t := &task{id: req.TaskID, principal: req.Principal, peer: req.Peer, trace: req.Trace}
	if req.Narrowed {
		ctx = netpolicy.Narrow(ctx, req.Egress)
		t.narrow = &req.Egress
	}
	if ask := req.RequestInput; ask != nil {
		t.requestInput = func(ctx context.Context, prompt string) (string, error) {
			a, err := ask(ctx, prompt)
			if err != nil {
				return "", err
			}
			// The guest reads the answer's parts where it read the task's.
			in := TaskRequest{TaskID: req.TaskID, ContextID: req.ContextID, MessageID: a.MessageID, Text: a.Text, Parts: a.Parts}
			if err := s.writeInbox(in); err != nil {
				return "", fmt.Errorf("writing in/: %w", err)
			}
			return a.Text, nil
		}
	}
	s.current.Store(t)
	defer s.current.Store(nil)
	defer t.scope.leave()
	t.mark = s.markUsage()
	s.setCapsuleURL(req.CapsuleURL)
	t.evt, _ = s.stream.Emit(EventTaskStart, s.sessEvt, TaskStart{TaskID: req.TaskID, ContextID: req.ContextID, Source: req.Source,
		InputBytes: len(req.Text), parent: req.Trace}, map[string]string{"input": req.Text})
	base := len(req.History)
	defer func() { s.tasks++ }() // a task, however many times it was reopened
	for reopens := 0; ; reopens++ {
		m := s.staged.Manifest
		out, v := s.runOnce(ctx, t, req, start, m.IsAgent() && reopens < m.Lifecycle.MaxTaskReopens)
		if v.Reopen == "" {
			if out.State == StateCompleted {
				// The task's thread is all its runs': what the next task of the context
				// is given holds its request, not only its last reopening.
				out.Thread = joinThreads(req.History[base:], out.Thread)
			}
			if !s.settle {
				// The folder is the session's output (a run, a task.md run): it has the
				// task's files as soon as the task ends. A failure loses only that copy.
				_ = s.held.Flush()
			}
			return out
		}
		// Reopened by an on-task-end hook: its message is the next user turn, after the
		// conversation so far, and the task's subscribers see it as progress.
		s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: v.Reopen, Note: true}, nil)
		req.History = append(slices.Clone(req.History), Turn{User: req.Text, Agent: out.Result, Thread: out.Thread})
		req.Text = v.Reopen
	}
}

// joinThreads is the thread of a task reopened after the runs earlier, last its last
// run's: their messages in order, from the latest compacted one (which holds the whole
// conversation up to it) when a run compacted.
func joinThreads(earlier []Turn, last Thread) Thread {
	if len(earlier) == 0 || last.Compacted {
		return last
	}
	var msgs []json.RawMessage
	compacted := false
	for _, th := range append(turnThreads(earlier), last) {
		var ms []json.RawMessage
		if len(th.Messages) > 0 && json.Unmarshal(th.Messages, &ms) != nil {
			return last // not the driver protocol's messages: the last run's stands alone
		}
		if th.Compacted {
			msgs, compacted = nil, true
		}
		msgs = append(msgs, ms...)
	}
	if len(msgs) == 0 {
		return last // runs kept without messages (a process capsule's): nothing to join
	}
	last.Messages, last.Compacted = mustJSON(msgs), compacted
	return last
}

func turnThreads(turns []Turn) []Thread {
	out := make([]Thread, len(turns))
	for i, t := range turns {
		out[i] = t.Thread
	}
	return out
}

// runOnce runs the task once (execute), writes its result and ends it (task_end): the
// verdict is what the on-task-end hooks answered, a reopen request among it when
// reopenable (an agent task under lifecycle.max_task_reopens) and the task completed.
func (s *session) runOnce(ctx context.Context, t *task, req TaskRequest, start time.Time, reopenable bool) (TaskOutcome, Verdict) {
	out := TaskOutcome{TaskID: req.TaskID, State: StateCompleted, Session: s.id, Layout: s.layout}
	t.scope.attempt(req.Text)
	result, state, err := s.execute(ctx, t, req)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		out.State, out.Result = StateCanceled, "error: the task was canceled"
	case err != nil:
		out.State, out.Result = state, "error: "+err.Error()
	default:
		out.Result = result
		if out.Artifacts, out.Reply, err = s.collectOutputs(); err != nil {
			out.State, out.Result = StateFailed, "error: "+err.Error()
		}
		out.Artifacts = append(out.Artifacts, t.relayed...)
	}
	// A script capsule that completed wrote out/result.txt itself; it is left as written.
	own := err == nil && !s.staged.Manifest.IsAgent()
	if werr := s.writeResult(req.TaskID, out.Result, !own); werr != nil && out.State == StateCompleted {
		out.State, out.Result = StateFailed, "error: "+werr.Error()
	}
	out.Turns = t.turnNo()
	if out.State == StateCompleted {
		out.Thread = t.thread
		t.scope.finish(out.Result)
	}
	now := time.Now()
	out.Receipt = s.measured(t, now, s.traceID(t, req))
	_, v, _ := s.stream.Ask(EventTaskEnd, t.evt, TaskEnd{TaskID: req.TaskID, State: out.State, Turns: out.Turns,
		DurationMS: now.Sub(start).Milliseconds(), reopenable: reopenable && out.State == StateCompleted, receipt: out.Receipt}, map[string]string{"output": out.Result})
	return out, v
}

// execute writes task.md and runs the task as its capsule's kind does: a process
// capsule's harness, the agent loop, or the script capsule's run.
func (s *session) execute(ctx context.Context, t *task, req TaskRequest) (result, state string, err error) {
	m := s.staged.Manifest
	if err := s.writeTask(req.Text); err != nil {
		return "", StateFailed, fmt.Errorf("writing task.md: %w", err)
	}
	if err := s.writeInbox(req); err != nil {
		return "", StateFailed, fmt.Errorf("writing in/: %w", err)
	}
	s.clearOutputs()
	if m.IsProcess() {
		return s.processTask(ctx, t, req.Text+inboxNote(req.Parts), req.History)
	}
	if m.IsAgent() {
		return s.agentTask(ctx, t, req.Text+inboxNote(req.Parts), req.History)
	}
	return s.scriptTask(ctx, t)
}

// writeTask puts the task's text in the workdir's task.md, held in memory for the
// guests (guestfs.Held) until something else may read the folder.
func (s *session) writeTask(text string) error {
	s.held.Put("task.md", []byte(text))
	return nil
}

// writeResult records the task's answer in out/result.txt (when main, held as task.md
// is), and in out/result_<task>.txt too when the conversation is threaded, so earlier
// answers stay readable (docs/reference/guest-abi.md "Files"), written to the folder.
func (s *session) writeResult(taskID, text string, main bool) error {
	if main {
		s.held.Put("out/result.txt", []byte(text+"\n"))
	}
	if s.staged.Manifest.Lifecycle.Conversation == "threaded" {
		if err := s.prep.make(); err != nil {
			return err
		}
		root, err := s.work.Root()
		if err != nil {
			return err
		}
		return guestfs.WriteOwn(root, "out/result_"+taskID+".txt", []byte(text+"\n"))
	}
	return nil
}

// chunks turns what a guest of task t streams into the task's chunk events.
func (s *session) chunks(t *task) func(thinking bool, text string) {
	return func(thinking bool, text string) {
		s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: text, Thinking: thinking}, nil)
	}
}

// setCapsuleURL makes url the MURMUR_CAPSULE_URL of the session's guests from now on,
// and MURMUR.md's capsule URL; the gateway learns it from each task's request.
func (s *session) setCapsuleURL(url string) {
	if url == "" {
		return
	}
	for i, kv := range s.env {
		if strings.HasPrefix(kv, "MURMUR_CAPSULE_URL=") {
			if kv[len("MURMUR_CAPSULE_URL="):] != url {
				env := append([]string(nil), s.env...) // calls in flight keep the slice they have
				env[i] = "MURMUR_CAPSULE_URL=" + url
				s.env = env
				if err := s.prep.setURL(url); err != nil {
					// The task runs on: the environment holds the URL, MURMUR.md keeps the last one.
					s.announce(nil, err.Error())
				}
			}
			return
		}
	}
}

// Task states a one-shot run ends in.
const (
	StateCompleted = "completed"
	StateFailed    = "failed"
)
