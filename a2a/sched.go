package a2a

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/taskstore"
)

// send takes a user message: the answer to a task waiting for input (named by taskId,
// or by contextId while one of its tasks waits), or a new task that starts, queues or
// is rejected by the lifecycle. With stream set it also opens the response's
// subscription, before any event of the interaction can be missed.
// The inline push config of in, if any, is filed on the task before it runs; the
// returned write is the store's of that config.
func (h *Handler) send(in incoming, stream bool) (*task, *subscription, *durable, *rpcError) {
	var open []taskstore.Running
	if h.fleet != nil {
		var rerr *rpcError
		if open, rerr = h.fleetOpen(in); rerr != nil {
			return nil, nil, nil, rerr
		}
		if t, rerr := h.remoteWaiting(in, open); rerr != nil || t != nil {
			if rerr != nil {
				return nil, nil, nil, rerr
			}
			return h.sendRemote(t, in, stream)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var w *durable
	if in.taskID != "" {
		t := h.ownTaskLocked(in.taskID, in.owner)
		if t == nil {
			return nil, nil, nil, errTaskNotFound(in.taskID)
		}
		if in.contextID != "" && in.contextID != t.contextID {
			return nil, nil, nil, errInvalidParams(fmt.Sprintf("message.contextId %q is not the context %q of task %s", in.contextID, t.contextID, t.id))
		}
		t, sub, rerr := h.answerLocked(t, in, stream, &w, now)
		return t, sub, w, rerr
	}
	if t := h.waiting[contextKey(in.owner, in.contextID)]; in.contextID != "" && t != nil {
		t, sub, rerr := h.answerLocked(t, in, stream, &w, now)
		return t, sub, w, rerr
	}
	t, sub, rerr := h.admitLocked(in, stream, open, &w, now)
	return t, sub, w, rerr
}

// answerLocked hands the message to the task's pending Input call.
func (h *Handler) answerLocked(t *task, in incoming, stream bool, pushWrite **durable, now time.Time) (*task, *subscription, *rpcError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.st.State; st != stateInputRequired || t.answer == nil {
		if terminal(st) {
			return nil, nil, errUnsupported(fmt.Sprintf("task %s is %s and takes no more messages; send without taskId to start a new task", t.id, st))
		}
		return nil, nil, errUnsupported(fmt.Sprintf("task %s is %s, not waiting for input", t.id, st))
	}
	if in.push != nil {
		// Before the answer: the config sees the task resume.
		w, rerr := h.attachPushLocked(t, in.push, false)
		if rerr != nil {
			return nil, nil, rerr
		}
		*pushWrite = w
	}
	t.history = append(t.history, message{ID: in.messageID, Role: "user", Text: in.text, TaskID: t.id, ContextID: t.contextID, Parts: t.offloadLocked(in.payload)})
	t.answer <- Answer{Text: in.text, MessageID: in.messageID, Parts: in.payload} // buffered: Input receives it even if it is just timing out
	t.answer = nil
	delete(h.waiting, t.key)
	t.setStatusLocked(status{State: stateWorking, Time: now}, now)
	var sub *subscription
	if stream {
		sub = t.subscribeSnapshotLocked()
	}
	return t, sub, nil
}

// admitLocked creates a task and starts, queues or rejects it.
func (h *Handler) admitLocked(in incoming, stream bool, open []taskstore.Running, pushWrite **durable, now time.Time) (*task, *subscription, *rpcError) {
	lc := h.cfg.Lifecycle
	if lc.Acceptance == AcceptNone {
		return nil, nil, errUnsupported("this capsule takes no A2A tasks (lifecycle task_acceptance: none)")
	}
	contextID := in.contextID
	if contextID == "" {
		contextID = ids.New("ctx_")
	}
	t := newTask(ids.New("tsk_"), contextID, in.text, h.spec, h.ringSize, now)
	t.setOwner(in.owner)
	t.url, t.trace, t.peer = in.url, in.trace, in.peer
	t.egress, t.hold = in.egress, in.hold
	in.hold.take()
	t.store = h.store
	t.pushesLoaded = true // a new task has none stored
	reason := h.refusalLocked(t.key, open)
	queued := h.fleet != nil
	if queued && reason != "" {
		// Ended at once by this replica, which delivers its push notifications.
		t.born, queued = true, false
	} else if queued && in.contextID == "" && !h.fleet.queued.Load() &&
		h.slots.active+len(h.slots.waiting) < h.fleet.depth(h.cfg.Lifecycle.Concurrency) {
		// A new context no other replica can know of yet, room here and nothing queued in
		// the store before it: this replica runs the task, claimed by the write that adds it.
		t.born, queued = true, false
		h.spec.metrics.claimed(h.spec.capsule)
	}
	h.store.add(t)
	t.mu.Lock()
	t.history = []message{{ID: in.messageID, Role: "user", Text: in.text, TaskID: t.id, ContextID: contextID, Parts: t.offloadLocked(in.payload)}}
	if reason != "" {
		msg := agentMessage(t, reason)
		t.st = status{State: stateRejected, Msg: &msg, Time: now}
		t.history = append(t.history, msg)
	} else {
		t.st = status{State: stateSubmitted, Time: now}
	}
	t.publishLocked(event{kind: evTask, task: t.snapshotLocked()}, now)
	t.mirror = queued // delivered, like run, by the replica that claims it
	if in.push != nil {
		// Filed before the task runs, delivering from its first event: one config on a
		// new task is never over the bound.
		*pushWrite, _ = h.attachPushLocked(t, in.push, true)
	}
	var sub *subscription
	if stream {
		sub = t.subscribeLocked(1)
	}
	if reason != "" {
		t.spec.metrics.ended(t.spec.capsule, stateRejected)
		h.store.ended(t)
		t.freeRingLocked()
		t.mu.Unlock()
		return t, sub, nil
	}
	if queued {
		// Queued in the store: whichever replica has a free slot claims it, this one
		// first when it has one (it is told before the others are).
		written, f := t.last, h.fleet
		t.mu.Unlock()
		go func() {
			if written.wait() == nil {
				f.kickClaim()
			}
		}()
		return t, sub, nil
	}
	t.mu.Unlock()
	h.placeLocked(t, now)
	return t, sub, nil
}

// agentMessage is a message from the agent in t's context.
func agentMessage(t *task, text string) message {
	return message{ID: ids.New("msg_"), Role: "agent", Text: text, TaskID: t.id, ContextID: t.contextID}
}

// startLocked gives t a concurrency slot and runs it; the caller holds h.mu and t.mu.
func (h *Handler) startLocked(t *task, now time.Time) {
	h.slots.active++
	t.holdsSlot = true
	t.ctx, t.cancel = context.WithCancel(h.base)
	t.setStatusLocked(status{State: stateWorking, Time: now}, now)
	job := &Job{TaskID: t.id, ContextID: t.contextID, Principal: t.owner, Text: t.text, URL: t.url, Trace: t.trace, Peer: t.peer,
		Budget: h.budgetFor(h.cfg, t.owner)}
	if t.egress != nil {
		job.Narrowed = true
		job.Egress, _ = netpolicy.ParseRules(*t.egress) // checked when the policy gave them
	}
	if len(t.history) > 0 && t.history[0].Role == "user" {
		job.MessageID, job.Parts = t.history[0].ID, t.history[0].Parts // its large files are read back by execute
	}
	if t.spec.threaded {
		job.History = h.store.turns(t.key)
	}
	if h.fleet != nil && t.prevRunner != "" && t.prevRunner != h.fleet.db.Instance() {
		job.Previous = Previous{Mark: t.prevMark, Gateway: t.prevRunner}
	}
	job.Chunk = func(text string) { h.chunk(t, text, chunkAnswer) }
	job.Thinking = func(text string) { h.chunk(t, text, chunkThinking) }
	job.Note = func(text string) { h.chunk(t, text, chunkNote) }
	job.Input = func(ctx context.Context, prompt string) (Answer, error) { return h.input(ctx, t, prompt) }
	h.cfg.Logger.Debug("a2a task started", "task", t.id, "context", t.contextID)
	go h.execute(t.ctx, t, job, t.last)
}

// execute runs the job, records its outcome and hands the slot on, all in one
// critical section: whoever sees the task end also finds the slot free.
func (h *Handler) execute(ctx context.Context, t *task, job *Job, started *durable) {
	var out Outcome
	if err := h.startDurable(ctx, started); err != nil {
		out = Outcome{State: stateFailed, Text: "error: the task store could not record that the task started: " + err.Error()}
	} else if parts, err := h.fetchBlobs(t, job.Parts); err != nil {
		out = Outcome{State: stateFailed, Text: "error: the message's files cannot be read back from the task store: " + err.Error()}
	} else {
		job.Parts = parts
		out = callExecutor(ctx, t.spec, job)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	t.mu.Lock()
	h.finishLocked(t, out, now)
	t.mu.Unlock()
	t.cancel()
	h.releaseLocked(t, now)
}

// startDurable waits, in a fleet, until the write that says the task started (its
// working status) is durable: a replica that dies before then leaves the task queued in
// the store, and another runs it, so this one must not have run it. A write the store
// keeps while its database is away is waited for until the database is back (the task
// then runs: nothing admitted is lost; its waiting client was told the store failed).
// One gateway alone runs at once, as it always did.
func (h *Handler) startDurable(ctx context.Context, started *durable) error {
	if h.fleet == nil {
		return nil
	}
	err := started.settle()
	var kept *taskstore.KeptError
	if !errors.As(err, &kept) {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for h.storeReady() != nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// callExecutor runs Execute, turning a panic into a failed outcome: a broken executor
// must not take the gateway down.
func callExecutor(ctx context.Context, spec *runSpec, job *Job) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = Outcome{State: stateFailed, Text: fmt.Sprintf("internal error: the executor panicked: %v", r)}
			spec.logger.Error("a2a executor panicked", "task", job.TaskID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	out = spec.exec.Execute(ctx, job)
	if out.State != stateCompleted && out.State != stateFailed {
		spec.logger.Warn("a2a executor returned an unknown state; the task fails", "task", job.TaskID, "state", out.State)
	}
	return out
}

// finishLocked records the outcome, unless the handler already ended the task
// (canceled, input-timeout): then Execute's result is ignored.
func (h *Handler) finishLocked(t *task, out Outcome, now time.Time) {
	if terminal(t.st.State) {
		return
	}
	t.mark = out.Mark
	if t.answer != nil {
		t.answer = nil
		if h.waiting[t.key] == t {
			delete(h.waiting, t.key)
		}
	}
	if out.State == stateCompleted {
		var reply *message
		if out.Message {
			reply = replyMessage(t, out)
		} else {
			h.publishArtifactsLocked(t, out, now)
		}
		if t.spec.threaded {
			// Before the completed status: a durable store then writes the turn first,
			// so a client that saw the completion finds the turn in its context.
			h.store.addTurn(t.key, Turn{User: t.text, Agent: out.Text, Thread: out.Thread.bounded()})
		}
		t.setStatusLocked(status{State: stateCompleted, Msg: reply, Time: now, Meta: out.Metadata}, now)
	} else {
		text := out.Text
		if text == "" {
			text = "the task failed"
		}
		msg := agentMessage(t, text)
		t.setStatusLocked(status{State: stateFailed, Msg: &msg, Time: now, Meta: out.Metadata}, now)
	}
	t.spec.metrics.ended(t.spec.capsule, t.st.State)
	t.spec.logger.Debug("a2a task ended", "task", t.id, "state", t.st.State, "duration", now.Sub(t.created))
	h.store.ended(t)
	t.freeRingLocked()
}

// answerID is the artifact id of a task's text answer.
const answerID = "answer"

// publishArtifactsLocked keeps and publishes a completed task's artifacts: its text answer
// (unless empty while others exist), then the rest. An answer streamed in chunks ends with
// the chunk that completes it (lastChunk), when what was streamed begins it; otherwise the
// whole answer replaces what was streamed.
func (h *Handler) publishArtifactsLocked(t *task, out Outcome, now time.Time) {
	if out.Text != "" || len(out.Artifacts) == 0 {
		a := artifact{ID: answerID, Name: answerID, Text: out.Text}
		t.artifacts = append(t.artifacts, a)
		e := event{kind: evArtifact, art: a, last: true}
		if sent := t.streamed.String(); sent != "" && strings.HasPrefix(out.Text, sent) {
			e.append, e.art.Text = true, out.Text[len(sent):]
		}
		t.publishLocked(e, now)
	}
	for i, oa := range out.Artifacts {
		a := artifact{ID: fmt.Sprintf("artifact-%d", i+1), Name: oa.Name, Description: oa.Description, Parts: t.offloadLocked(oa.Parts)}
		if len(a.Parts) == 0 {
			a.Parts = []Part{{Kind: KindText}}
		}
		t.artifacts = append(t.artifacts, a)
		t.publishLocked(event{kind: evArtifact, art: a, last: true}, now)
	}
	t.streamed.Reset()
}

// replyMessage is the Message that answers a completed task (Outcome.Message): its text
// and every artifact's parts, kept as the completed status's message.
func replyMessage(t *task, out Outcome) *message {
	msg := agentMessage(t, out.Text)
	var parts []Part
	for _, a := range out.Artifacts {
		parts = append(parts, a.Parts...)
	}
	if len(parts) > 0 { // else the text is all of it
		if out.Text != "" {
			parts = append([]Part{{Kind: KindText, Text: out.Text}}, parts...)
		}
		msg.Parts = t.offloadLocked(parts)
	}
	t.reply = true
	t.streamed.Reset()
	return &msg
}

// What a chunk of streamed text is.
type chunkKind uint8

const (
	chunkAnswer   chunkKind = iota // answer text: a chunk of the "answer" artifact
	chunkThinking                  // reasoning: a working status, its part marked thinking
	chunkNote                      // a progress note: a working status
)

// chunk streams text the capsule produced: answer text as a chunk of the "answer"
// artifact (appended to the chunks before it), thinking and notes as a working status
// update carrying an agent message (thinking marked so). Chunks are progress, not state:
// they are not kept in the task, which gets the whole answer when it completes.
func (h *Handler) chunk(t *task, text string, kind chunkKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.State != stateWorking {
		return
	}
	now := time.Now()
	if kind == chunkAnswer {
		if text == "" {
			return
		}
		e := event{kind: evArtifact, art: artifact{ID: answerID, Name: answerID, Text: text}, append: t.streamed.Len() > 0, progress: true}
		t.streamed.WriteString(text)
		t.publishLocked(e, now)
		return
	}
	msg := agentMessage(t, text)
	msg.Thinking = kind == chunkThinking
	t.publishLocked(event{kind: evStatus, status: status{State: stateWorking, Msg: &msg, Time: now}, progress: true}, now)
}

// input implements Job.Input.
func (h *Handler) input(ctx context.Context, t *task, prompt string) (Answer, error) {
	h.mu.Lock()
	t.mu.Lock()
	if st := t.st.State; st != stateWorking {
		t.mu.Unlock()
		h.mu.Unlock()
		return Answer{}, fmt.Errorf("a2a: task %s is %s and cannot ask for input", t.id, st)
	}
	answer := make(chan Answer, 1)
	t.answer = answer
	now := time.Now()
	msg := agentMessage(t, prompt)
	t.setStatusLocked(status{State: stateInputRequired, Msg: &msg, Time: now}, now)
	h.waiting[t.key] = t
	taskCtx, timeout := t.ctx, t.spec.inputTimeout
	t.mu.Unlock()
	h.mu.Unlock()

	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case a := <-answer:
		return a, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-taskCtx.Done():
		err = taskCtx.Err()
	case <-expired:
		err = ErrInputTimeout
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.answer != answer { // answered, or canceled, meanwhile
		select {
		case a := <-answer:
			return a, nil
		default:
			return Answer{}, fmt.Errorf("a2a: waiting for input: %w", err)
		}
	}
	t.answer = nil
	if h.waiting[t.key] == t {
		delete(h.waiting, t.key)
	}
	if errors.Is(err, ErrInputTimeout) {
		now := time.Now()
		msg := agentMessage(t, "input-timeout")
		t.setStatusLocked(status{State: stateFailed, Msg: &msg, Time: now}, now)
		t.spec.metrics.ended(t.spec.capsule, stateFailed)
		h.store.ended(t)
		t.freeRingLocked()
		t.cancel() // the guest stops; its slot frees when Execute returns
		return Answer{}, err
	}
	return Answer{}, fmt.Errorf("a2a: waiting for input: %w", err)
}

// cancel serves tasks/cancel and CancelTask; the answer waits until the cancelation is
// durable.
func (h *Handler) cancel(id string, who caller) (*snapshot, *rpcError) {
	snap, last, rerr := h.cancelTask(id, who.principal)
	if rerr != nil {
		return nil, rerr
	}
	if err := last.wait(); err != nil {
		return nil, errStore(err)
	}
	return snap, nil
}

func (h *Handler) cancelTask(id, principal string) (*snapshot, *durable, *rpcError) {
	if h.fleet != nil {
		t := h.lookup(id, caller{principal: principal})
		if t == nil {
			return nil, nil, errTaskNotFound(id)
		}
		t.mu.Lock()
		mirror, st := t.mirror, t.st.State
		t.mu.Unlock()
		if mirror && !terminal(st) {
			return h.cancelRemote(t, principal)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.ownTaskLocked(id, principal)
	if t == nil {
		return nil, nil, errTaskNotFound(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.st.State; terminal(st) {
		return nil, nil, errNotCancelable(id, st)
	}
	h.cancelLocked(t, "canceled by the client", time.Now())
	return t.snapshotLocked(), t.last, nil
}

// cancelLocked ends a task canceled at once. A queued task leaves its queue; a running
// one has its context canceled but keeps its slot until Execute returns, so a guest that
// is slow to stop never runs beside the next task of its context.
func (h *Handler) cancelLocked(t *task, reason string, now time.Time) {
	h.stopLocked(t, stateCanceled, reason, now)
}

// interruptLocked ends a task the gateway stops under: failed "interrupted", as a restart
// ends the tasks a killed process left (docs/reference/a2a.md "Durable tasks").
func (h *Handler) interruptLocked(t *task, now time.Time) {
	why := interrupted
	if h.fleet != nil {
		why = stoppedWhileRunning(h.fleet.db.Instance())
	}
	h.stopLocked(t, stateFailed, why, now)
	t.spec.metrics.interrupted(t.spec.capsule)
}

// stopLocked ends t in state with the agent's reason, at once: see cancelLocked.
func (h *Handler) stopLocked(t *task, state, reason string, now time.Time) {
	queued := t.st.State == stateSubmitted
	if t.answer != nil {
		t.answer = nil
		if h.waiting[t.key] == t {
			delete(h.waiting, t.key)
		}
	}
	msg := agentMessage(t, reason)
	t.setStatusLocked(status{State: state, Msg: &msg, Time: now}, now)
	t.spec.metrics.ended(t.spec.capsule, state)
	h.store.ended(t)
	t.freeRingLocked()
	if queued {
		h.unqueueLocked(t)
		h.slotMetricsLocked()
		h.checkIdleLocked()
	} else if t.cancel != nil {
		t.cancel()
	}
}

// lookup returns the caller's task with id, or nil: another principal's task is not
// found, exactly as one that does not exist (docs/reference/a2a.md "Principals").
func (h *Handler) lookup(id string, who caller) *task {
	h.mu.Lock()
	t := h.ownTaskLocked(id, who.principal)
	h.mu.Unlock()
	h.fresh(t) // a fleet's task another replica runs: as the store has it now
	return t
}

// ownTaskLocked returns principal's task with id, or nil.
func (h *Handler) ownTaskLocked(id, principal string) *task {
	if t := h.store.get(id); t != nil && t.owner == principal {
		return t
	}
	return nil
}
