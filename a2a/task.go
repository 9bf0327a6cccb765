package a2a

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Task states, spelled as in A2A 0.3; the 1.0 dialect renders them TASK_STATE_*.
const (
	stateSubmitted     = "submitted"
	stateWorking       = "working"
	stateInputRequired = "input-required"
	stateCompleted     = "completed"
	stateFailed        = "failed"
	stateCanceled      = "canceled"
	stateRejected      = "rejected"
)

// terminal reports whether a task in state s can no longer change.
func terminal(s string) bool {
	return s == stateCompleted || s == stateFailed || s == stateCanceled || s == stateRejected
}

// settled reports whether a blocking send returns at state s: terminal or interrupted.
func settled(s string) bool { return terminal(s) || s == stateInputRequired }

// message is one A2A message, dialect-neutral.
type message struct {
	ID, Role, Text    string // role: "user" or "agent"; Text: its text parts, joined with "\n"
	TaskID, ContextID string
	// Parts are every part in order when the message holds more than text; nil when Text
	// is all of it.
	Parts []Part `json:",omitempty"`
	// Thinking marks streamed reasoning: its part carries metadata {"thinking": true}.
	Thinking bool
}

// status is a task's status at one moment.
type status struct {
	State string
	Msg   *message
	Time  time.Time
	// Meta is a finished task's metadata (Outcome.Metadata), set on its terminal status:
	// the task carries it from there, and so does the final status update.
	Meta map[string]json.RawMessage `json:",omitempty"`
}

// artifact is one task output: its parts, or when it has none, one text part.
type artifact struct {
	ID, Name, Text string
	Description    string `json:",omitempty"`
	Parts          []Part `json:",omitempty"`
}

// snapshot is an immutable copy of a task, taken under its lock for encoding.
type snapshot struct {
	ID, ContextID string
	Status        status
	// Reply says the client of a blocking send is answered with the status message, not
	// the task (Outcome.Message).
	Reply     bool `json:",omitempty"`
	Artifacts []artifact
	History   []message
	Updated   time.Time
}

type eventKind uint8

const (
	evTask     eventKind = iota // a whole task: the first event of a task, resyncs
	evStatus                    // TaskStatusUpdateEvent
	evArtifact                  // TaskArtifactUpdateEvent
	evLagged                    // the notice a subscriber gets when it fell behind
)

// event is one entry of a task's stream. seq numbers are per task, from 1, and become
// the SSE ids.
type event struct {
	seq    uint64
	kind   eventKind
	task   *snapshot // evTask
	status status    // evStatus, evLagged (the current status)
	final  bool      // evStatus, evTask: the interaction ends here (terminal or input-required)
	art    artifact  // evArtifact
	append bool      // evArtifact
	last   bool      // evArtifact
	missed uint64    // evLagged: events skipped, replaced by the resync that follows
	// progress marks a chunk: a working status that changes nothing kept in the task.
	progress bool
	// durable is the store's write of this event (or of the state a resync shows): a
	// client is sent the event only once it is durable. nil: nothing to wait for.
	durable *durable
}

// ends reports whether a stream stops after writing e.
func (e event) ends() bool {
	switch e.kind {
	case evStatus:
		return e.final
	case evTask:
		return e.final || terminal(e.task.Status.State)
	}
	return false
}

// runSpec is what a task runs with, captured at admission so that Update affects only
// tasks admitted after it.
type runSpec struct {
	exec         Executor
	metrics      *Metrics
	capsule      string
	inputTimeout time.Duration
	threaded     bool
	logger       *slog.Logger
	// digest is the capsule version's (Config.Digest), recorded with the tasks it admits.
	digest string
}

// task is one A2A task. Fields under mu change as it runs; the handler's lock, when
// both are needed, is taken first.
type task struct {
	id, contextID string
	owner         string // the principal that created it ("" anonymous)
	key           string // contextKey(owner, contextID): where its context's state is kept
	text          string // the first message's text, for Job.Text and threaded turns
	url           string // the endpoint URL the creating request reached, for Job.URL
	spec          *runSpec
	store         store // records what the task publishes (set before its first event)

	mu        sync.Mutex
	st        status
	history   []message
	artifacts []artifact
	created   time.Time
	updated   time.Time
	ring      []event // the last ringSize events; freed once terminal and unwatched
	ringSize  int
	ringFreed bool
	seq       uint64        // newest event's seq
	last      *durable      // the store's write of the newest event
	changed   chan struct{} // closed and replaced on every event
	subs      int           // open subscriptions
	ctx       context.Context
	cancel    context.CancelFunc // set while admitted to run
	answer    chan Answer        // non-nil while input-required
	reply     bool               // the client is answered with a Message (snapshot.Reply)
	// egress is what the route's policy narrowed the task's network reach to (nil: not
	// narrowed), kept with its record so that whichever replica runs it narrows it.
	egress *[]string
	// hold is the principal's count of unfinished tasks this one takes, released when
	// it ends (nil: not counted).
	hold *limitHold
	// blobs are the task's large files without a durable store; blobWrites the store's
	// writes of them not yet joined to an event's write (files.go).
	blobs      map[string][]byte
	blobWrites []*durable
	// streamed is the answer text streamed so far as chunks of the "answer" artifact.
	streamed  strings.Builder
	holdsSlot bool // holds one of the capsule's concurrency slots
	// pushes are the task's push-notification configs (push.go); pushesLoaded says they
	// were read from the store (a restored task's are read when first needed).
	pushes       []*pushState
	pushesLoaded bool
	// mirror marks a task of a fleet that another replica runs, or that is queued: its
	// state comes from the store (fleet.go), never from this replica. watchers counts
	// those waiting for it to settle, followers those waiting for its next event, beside
	// its subscribers; refreshing and again serialize the reads that bring it up to the
	// store.
	mirror, refreshing, again bool
	watchers, followers       int
	// born says this replica of a fleet admitted the task into a new context with room,
	// and runs it: the write that adds it claims it.
	born bool
	// mark is what the task's run left on its context's folder (Outcome.Mark), kept in
	// its record; prevMark and prevRunner are those of the context's task before it, on
	// a replica of a fleet (Job.Previous).
	mark, prevMark, prevRunner string
	// trace is the span context the task runs under (Job.Trace): kept in memory only,
	// so a task run after a restart or by another replica starts a trace of its own.
	trace trace.SpanContext
	// peer is where the task comes from when a capsule's runtime sent it (Job.Peer),
	// kept in memory like trace: a requeued peer task runs with no chain.
	peer *PeerOrigin
}

func newTask(id, contextID, text string, spec *runSpec, ringSize int, now time.Time) *task {
	return &task{
		id: id, contextID: contextID, key: contextID, text: text, spec: spec,
		created: now, updated: now, ringSize: ringSize,
		changed: make(chan struct{}),
	}
}

// setOwner makes principal the task's owner, before anyone else sees the task.
func (t *task) setOwner(principal string) {
	t.owner, t.key = principal, contextKey(principal, t.contextID)
}

// publishLocked appends e to the task's stream and wakes its watchers.
func (t *task) publishLocked(e event, now time.Time) {
	t.seq++
	e.seq = t.seq
	t.updated = now
	if t.store != nil {
		e.durable = t.store.published(t, e)
		if len(t.blobWrites) > 0 && e.durable != nil {
			// The event is durable only with the files its records refer to.
			for _, w := range t.blobWrites {
				if w != nil {
					e.durable.chs = append(e.durable.chs, w.chs...)
				}
			}
		}
		t.blobWrites = nil
		t.last = e.durable
	}
	t.ringAppendLocked(e)
	close(t.changed)
	t.changed = make(chan struct{})
}

// ringAppendLocked keeps e, the task's newest event, in its replay buffer.
func (t *task) ringAppendLocked(e event) {
	if !t.ringFreed {
		if len(t.ring) < t.ringSize {
			t.ring = append(t.ring, e)
		} else {
			t.ring[(e.seq-1)%uint64(t.ringSize)] = e
		}
	}
}

// freeRingLocked drops the replay buffer of a finished task nobody watches: a later
// subscriber starts from a snapshot and never needs it, and a thousand finished tasks
// should not each hold 512 events.
func (t *task) freeRingLocked() {
	if t.subs == 0 && terminal(t.st.State) {
		t.ring, t.ringFreed = nil, true
	}
}

// setStatusLocked records a new status and publishes it; final marks the end of the
// interaction (terminal states and input-required).
func (t *task) setStatusLocked(st status, now time.Time) {
	t.st = st
	if st.Msg != nil {
		t.history = append(t.history, *st.Msg)
	}
	t.publishLocked(event{kind: evStatus, status: st, final: settled(st.State)}, now)
}

// oldestLocked is the seq of the oldest event still in the ring.
func (t *task) oldestLocked() uint64 {
	if t.seq < uint64(len(t.ring)) {
		return 1
	}
	return t.seq - uint64(len(t.ring)) + 1
}

// snapshotLocked copies the task for encoding.
func (t *task) snapshotLocked() *snapshot {
	return &snapshot{
		ID: t.id, ContextID: t.contextID, Status: t.st, Reply: t.reply,
		Artifacts: slices.Clone(t.artifacts), History: slices.Clone(t.history),
		Updated: t.updated,
	}
}

// snapshot copies the task for encoding.
func (t *task) snapshot() *snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshotLocked()
}

// durableSnapshot copies the task for an answer to a client and waits, without holding
// the task's lock, until the state it shows is durable.
func (t *task) durableSnapshot() (*snapshot, error) {
	t.mu.Lock()
	snap, last := t.snapshotLocked(), t.last
	t.mu.Unlock()
	return snap, last.wait()
}

// subscription reads one task's stream for one SSE response.
type subscription struct {
	t       *task
	next    uint64  // seq of the next event to deliver from the ring
	pending []event // delivered before the ring: the snapshot a resubscribe starts with
	closed  bool
}

// subscribeLocked opens a subscription that delivers the events from seq from on.
func (t *task) subscribeLocked(from uint64) *subscription {
	t.subs++
	return &subscription{t: t, next: from}
}

// subscribeSnapshotLocked opens a subscription that starts with the task's current
// state, then delivers the events that follow it.
func (t *task) subscribeSnapshotLocked() *subscription {
	t.subs++
	snap := event{seq: t.seq, kind: evTask, task: t.snapshotLocked(), durable: t.last}
	return &subscription{t: t, next: t.seq + 1, pending: []event{snap}}
}

// pull returns the events the subscriber has not had yet, and a channel closed when
// there are more. A subscriber that fell out of the ring gets a lagged notice and then
// the current state instead of the events it missed: never a silent gap.
func (s *subscription) pull() ([]event, <-chan struct{}) {
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	out := s.pending
	s.pending = nil
	if s.next <= t.seq && s.next < t.oldestLocked() {
		// Out of the buffer: a durable store's journal holds them once their writes are
		// committed. A write still in flight is waited for (without the lock; the store
		// commits in order, so the newest write's commit covers the older ones), then
		// the journal is read again.
		evs, ok := t.journalLocked(s.next, t.oldestLocked()-1)
		for try := 0; !ok && t.last != nil && try < 3; try++ {
			last := t.last
			t.mu.Unlock()
			err := last.wait()
			t.mu.Lock()
			if err != nil {
				break
			}
			evs, ok = t.journalLocked(s.next, t.oldestLocked()-1)
		}
		if ok {
			out = append(out, evs...)
			s.next = t.oldestLocked()
		}
	}
	if s.next <= t.seq && s.next < t.oldestLocked() {
		snap := event{seq: t.seq, kind: evTask, task: t.snapshotLocked(),
			// The resync stands for everything up to now, so it ends the stream where
			// the skipped events would have: at a terminal state or input-required.
			final: settled(t.st.State), durable: t.last}
		out = append(out, event{seq: s.next, kind: evLagged, status: t.st, missed: t.seq - s.next + 1}, snap)
		s.next = t.seq + 1
	}
	for ; s.next <= t.seq; s.next++ {
		out = append(out, t.ring[(s.next-1)%uint64(t.ringSize)])
	}
	return out, t.changed
}

// journalLocked reads events from the store's journal, when it keeps one.
func (t *task) journalLocked(from, to uint64) ([]event, bool) {
	if t.store == nil {
		return nil, false
	}
	return t.store.journal(t, from, to)
}

// close ends the subscription and frees the ring of a finished task nobody watches.
func (s *subscription) close() {
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	t.subs--
	t.freeRingLocked()
}
