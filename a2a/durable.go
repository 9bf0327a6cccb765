package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
)

// interrupted is the status message of a task that was admitted but not finished when
// the gateway stopped: a durable store ends it failed on the next start.
const interrupted = "interrupted: the gateway stopped while this task ran"

// durable is one write to the task store in flight: wait returns nil once it is on disk,
// or the error that failed it. Any number of callers may wait; a nil *durable (the memory
// store) is durable at once. The store commits its writes in the order they were queued,
// and a task's writes are queued under its lock, so when one of a task's writes is
// durable, its earlier ones were committed too (unless their own commit failed).
type durable struct {
	once sync.Once
	// hurry is the store's Hurry, called when a caller waits (taskstore.Hurrier); nil
	// for a store that commits without gathering.
	hurry taskstore.Hurrier
	chs   []<-chan error
	err   error
}

// storeReady is the task store's Ready (taskstore.Health), nil for a store without it or
// the memory store.
func (h *Handler) storeReady() error {
	if ds, ok := h.store.(*durableStore); ok {
		if hs, ok := ds.db.(taskstore.Health); ok {
			return hs.Ready()
		}
	}
	return nil
}

func (d *durable) wait() error {
	if d == nil {
		return nil
	}
	err := d.waitOnce()
	// A write the store kept while its storage was away is in the storage once the
	// store is ready again: the state it recorded is durable after all.
	var kept *taskstore.KeptError
	if err != nil && errors.As(err, &kept) {
		if h, ok := d.hurry.(taskstore.Health); ok && h.Ready() == nil {
			return nil
		}
	}
	return err
}

func (d *durable) waitOnce() error { return d.waitHurried(true) }

// settle is wait without hurrying the store: the write joins the batch being gathered,
// for a waiter that can bear the group window and should not cost a commit of its own.
func (d *durable) settle() error {
	if d == nil {
		return nil
	}
	err := d.waitHurried(false)
	var kept *taskstore.KeptError
	if err != nil && errors.As(err, &kept) {
		if h, ok := d.hurry.(taskstore.Health); ok && h.Ready() == nil {
			return nil
		}
	}
	return err
}

func (d *durable) waitHurried(hurry bool) error {
	d.once.Do(func() {
		if hurry && d.hurry != nil && slices.ContainsFunc(d.chs, func(ch <-chan error) bool { return len(ch) == 0 }) {
			d.hurry.Hurry()
		}
		for _, ch := range d.chs {
			if err := <-ch; err != nil && d.err == nil {
				d.err = err
			}
		}
	})
	return d.err
}

// durableStore is the handler's memory (a memoryStore, which it delegates to) as a cache
// over a taskstore.Store: every change of every task is written to the store — the task
// record (taskRecord) and the journal event (eventRecord) of each published event, each
// threaded turn, each push config — and what the memory dropped is read back from it.
// Like memoryStore it is called holding Handler.mu, except published and journal, which
// are called holding the task's lock only and so touch nothing but the store.
type durableStore struct {
	mem     *memoryStore
	db      taskstore.Store
	hurry   taskstore.Hurrier // db, when it gathers writes; nil when it does not
	capsule string            // the DB's capsule key: Config.Card.Name at NewHandler
	spec    *runSpec
	ring    int
	// requeued are the tasks that never started, to be placed again by NewHandler.
	requeued []*task
	// fleet says other replicas share db (fleet.go): what the memory holds of a task
	// another replica runs, or of a conversation, may be behind the store's.
	fleet bool
}

// taskRecord is a task as the store keeps it (taskstore.Task.Data): its snapshot, when it
// was created, and the seq of its newest event.
type taskRecord struct {
	snapshot
	Created time.Time
	Seq     uint64
	// Egress is the network reach the route's policy narrowed the task to (absent: not
	// narrowed; empty: nothing).
	Egress *[]string `json:",omitempty"`
}

// eventRecord is one journal entry (taskstore.Event.Data), dialect-neutral: the fields of
// event, rendered into either dialect when replayed.
type eventRecord struct {
	Kind     string    `json:"kind"` // "task", "status" or "artifact"
	Task     *snapshot `json:",omitempty"`
	Status   *status   `json:",omitempty"`
	Final    bool      `json:",omitempty"`
	Artifact *artifact `json:",omitempty"`
	Append   bool      `json:",omitempty"`
	Last     bool      `json:",omitempty"`
}

var kindNames = map[eventKind]string{evTask: "task", evStatus: "status", evArtifact: "artifact"}

func encodeEvent(e event) []byte {
	r := eventRecord{Kind: kindNames[e.kind], Final: e.final}
	switch e.kind {
	case evTask:
		r.Task = e.task
	case evStatus:
		r.Status = &e.status
	case evArtifact:
		r.Artifact, r.Append, r.Last = &e.art, e.append, e.last
	}
	b, _ := json.Marshal(r) // plain strings, times and bools: cannot fail
	return b
}

func decodeEvent(seq uint64, data []byte) (event, error) {
	var r eventRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return event{}, err
	}
	e := event{seq: seq, final: r.Final}
	switch {
	case r.Kind == "task" && r.Task != nil:
		e.kind, e.task = evTask, r.Task
	case r.Kind == "status" && r.Status != nil:
		e.kind, e.status = evStatus, *r.Status
	case r.Kind == "artifact" && r.Artifact != nil:
		e.kind, e.art, e.append, e.last = evArtifact, *r.Artifact, r.Append, r.Last
	default:
		return event{}, fmt.Errorf("journal event %d: kind %q without its fields", seq, r.Kind)
	}
	return e, nil
}

// newDurableStore opens the capsule's tasks in db: a finished task comes back read-only;
// one that never started (submitted) is kept to run again (requeued, oldest first); one
// that was working or waiting for input ends failed (interrupted), written back with its
// status event — a guest's stack cannot be resumed.
func newDurableStore(db taskstore.Store, capsule string, spec *runSpec, ring int, fleet bool) (*durableStore, error) {
	s := &durableStore{mem: newMemoryStore(keepFinished), db: db, capsule: capsule, spec: spec, ring: ring, fleet: fleet}
	s.hurry, _ = db.(taskstore.Hurrier)
	if fleet {
		return s, nil // the fleet's tasks stay in the store until a replica claims or reads them
	}
	recs, err := s.startingRecords()
	if err != nil {
		return nil, err
	}
	var writes []*durable
	for _, rec := range recs {
		t, err := s.restore(rec)
		if err != nil {
			return nil, err
		}
		s.mem.add(t)
		t.mu.Lock()
		if t.st.State == stateSubmitted && s.rebuildRing(t) {
			t.mu.Unlock()
			s.requeued = append(s.requeued, t)
			continue
		}
		if !terminal(t.st.State) {
			now := time.Now()
			msg := agentMessage(t, interrupted)
			t.setStatusLocked(status{State: stateFailed, Msg: &msg, Time: now}, now)
			writes = append(writes, t.last)
			spec.metrics.interrupted(capsule)
		}
		t.freeRingLocked()
		t.mu.Unlock()
		s.mem.ended(t)
	}
	for _, w := range writes {
		if err := w.wait(); err != nil {
			return nil, fmt.Errorf("a2a: recording the interrupted tasks: %w", err)
		}
	}
	return s, nil
}

// startingRecords returns the records a start restores, oldest first (so the memory
// store keeps the most recent): every task the store's index does not mark finished, and
// the newest finished ones the memory store holds. The others stay on disk, read when
// asked for: a start reads the index, not every task's record.
func (s *durableStore) startingRecords() ([]taskstore.Task, error) {
	var open, finished []taskstore.Head
	err := s.db.Heads(s.capsule, func(h taskstore.Head) bool {
		if h.Done {
			finished = append(finished, h)
		} else {
			open = append(open, h)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("a2a: reading the task store: %w", err)
	}
	byUpdated := func(a, b taskstore.Head) int { return a.Updated.Compare(b.Updated) }
	slices.SortStableFunc(finished, byUpdated)
	open = append(open, finished[max(0, len(finished)-keepFinished):]...)
	slices.SortStableFunc(open, byUpdated)
	recs := make([]taskstore.Task, 0, len(open))
	for _, h := range open {
		rec, ok, err := s.db.Task(s.capsule, h.ID)
		if err != nil {
			return nil, fmt.Errorf("a2a: reading the task store: %w", err)
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// rebuildRing refills a requeued task's replay buffer from its journal, so that the
// events it publishes from now on follow the ones it had, id for id; false when the
// journal does not hold them all (the task is then interrupted instead of run).
func (s *durableStore) rebuildRing(t *task) bool {
	evs, ok := s.journal(t, 1, t.seq)
	if !ok && t.seq > 0 {
		return false
	}
	t.ringFreed, t.ring = false, nil
	for _, e := range evs {
		if len(t.ring) < t.ringSize {
			t.ring = append(t.ring, e)
		} else {
			t.ring[(e.seq-1)%uint64(t.ringSize)] = e
		}
	}
	return true
}

// restore rebuilds a task from its record: never run again, its replay buffer empty (a
// resubscribe reads the journal).
func (s *durableStore) restore(rec taskstore.Task) (*task, error) {
	r, err := decodeRecord(rec)
	if err != nil {
		return nil, err
	}
	text := ""
	if len(r.History) > 0 {
		text = r.History[0].Text
	}
	t := newTask(r.ID, r.ContextID, text, s.spec, s.ring, r.Created)
	t.setOwner(rec.Owner) // the store keeps the owner beside the record, for its index
	t.store = s
	t.st, t.history, t.artifacts, t.updated, t.seq = r.Status, r.History, r.Artifacts, r.Updated, r.Seq
	t.reply, t.egress = r.Reply, r.Egress
	t.ring, t.ringFreed = nil, terminal(r.Status.State)
	return t, nil
}

func (s *durableStore) add(t *task) { s.mem.add(t) }

// write starts a write to the store: its channels are added as the store's writes return.
func (s *durableStore) write(chs ...<-chan error) *durable {
	return &durable{hurry: s.hurry, chs: chs}
}

// finishedOnDisk returns, from the store's index, principal's finished tasks not in skip as
// snapshots holding what the index has (id, context, state and its time, last change).
func (s *durableStore) finishedOnDisk(skip map[string]bool, principal string) ([]*snapshot, error) {
	var out []*snapshot
	err := s.db.Heads(s.capsule, func(h taskstore.Head) bool {
		// A fleet's unfinished tasks run on other replicas too: the store knows them all.
		if (h.Done || s.fleet) && !skip[h.ID] && h.Owner == principal {
			out = append(out, &snapshot{ID: h.ID, ContextID: h.ContextID, Status: status{State: h.State, Time: h.Since}, Updated: h.Updated})
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("a2a: reading the task store's index: %w", err)
	}
	return out, nil
}

// stored returns a task's snapshot as its record holds it, without keeping it in memory.
func (s *durableStore) stored(id string) (*snapshot, bool, error) {
	rec, ok, err := s.db.Task(s.capsule, id)
	if err != nil || !ok {
		return nil, false, err
	}
	r, err := decodeRecord(rec)
	if err != nil {
		return nil, false, err
	}
	return &r.snapshot, true, nil
}

// decodeRecord reads a task's record (taskstore.Task.Data).
func decodeRecord(rec taskstore.Task) (*taskRecord, error) {
	var r taskRecord
	if err := json.Unmarshal(rec.Data, &r); err != nil {
		return nil, fmt.Errorf("a2a: task %s in the task store: %w", rec.ID, err)
	}
	return &r, nil
}

// get returns the task from memory, or else from the DB (a finished task the memory
// store forgot), read-only.
func (s *durableStore) get(id string) *task {
	if t := s.mem.get(id); t != nil {
		return t
	}
	rec, ok, err := s.db.Task(s.capsule, id)
	if err != nil || !ok {
		return nil
	}
	t, err := s.restore(rec)
	if err != nil {
		return nil
	}
	if !terminal(t.st.State) {
		if !s.fleet {
			return nil // a live task is always in memory
		}
		if t = s.mirrorOf(rec); t != nil {
			s.mem.add(t)
		}
		return t
	}
	s.mem.add(t)
	s.mem.ended(t)
	return t
}

func (s *durableStore) ended(t *task)      { s.mem.ended(t) }
func (s *durableStore) each(f func(*task)) { s.mem.each(f) }

// turns returns the context's turns from memory, or else from the DB (after a restart,
// or once the memory store dropped the context), keeping them in memory again.
func (s *durableStore) turns(contextID string) []Turn {
	if got := s.mem.turns(contextID); len(got) > 0 && !s.fleet {
		return got
	}
	items, err := s.db.Turns(s.capsule, contextID)
	if err != nil || len(items) == 0 {
		return []Turn{}
	}
	if s.fleet {
		// Another replica may have added turns: the store's are the conversation.
		out := make([]Turn, 0, len(items))
		for _, item := range items {
			if turn, ok := decodeTurn(item); ok {
				out = append(out, turn)
			}
		}
		return out
	}
	for _, item := range items {
		if turn, ok := decodeTurn(item); ok {
			s.mem.addTurn(contextID, turn)
		}
	}
	return s.mem.turns(contextID)
}

func (s *durableStore) addTurn(contextID string, turn Turn) {
	if !s.fleet {
		s.turns(contextID) // load what the DB holds first, so memory does not restart the context
		s.mem.addTurn(contextID, turn)
	}
	// A compacted thread is version 3, so a release that cannot tell it from a task's own
	// messages reads its text only; any other stays version 2, readable by those releases.
	v := turnRecordThread
	if turn.Compacted {
		v = turnRecordVersion
	}
	b, _ := json.Marshal(turnRecord{V: v, User: turn.User, Agent: turn.Agent, Messages: turn.Messages,
		Continuation: turn.Continuation, ContinuationBy: turn.ContinuationBy, Compacted: turn.Compacted})
	// Not waited for here: the task's completed status is queued after it, and a client
	// learns of the completion only once that is durable.
	s.db.AddTurn(s.capsule, contextID, b)
}

// Versions of the turnRecord: version 1 (no V) held the text of a turn only; version 2
// added its Thread; version 3 (turnRecordVersion, the newest read) marks a compacted one.
const (
	turnRecordThread  = 2
	turnRecordVersion = 3
)

// turnRecord is a threaded turn as the store keeps it (a taskstore turn item).
type turnRecord struct {
	V              int `json:",omitempty"`
	User, Agent    string
	Messages       json.RawMessage `json:",omitempty"`
	Continuation   string          `json:",omitempty"`
	ContinuationBy string          `json:",omitempty"`
	Compacted      bool            `json:",omitempty"`
}

// decodeTurn reads a turnRecord of any version. One written by a later release keeps
// its text only: what it added cannot be trusted to mean what this release reads.
func decodeTurn(item []byte) (Turn, bool) {
	var r turnRecord
	if json.Unmarshal(item, &r) != nil {
		return Turn{}, false
	}
	turn := Turn{User: r.User, Agent: r.Agent}
	if r.V >= turnRecordThread && r.V <= turnRecordVersion {
		turn.Thread = Thread{Messages: r.Messages, Continuation: r.Continuation, ContinuationBy: r.ContinuationBy, Compacted: r.Compacted}
	}
	return turn, true
}

// published writes the task record and the journal event of e, just published by t
// (t.mu held), and returns the write of the event.
func (s *durableStore) published(t *task, e event) *durable {
	// The event before the record: a reader of the record (another replica following the
	// task) then finds in the journal every event up to the record's, whichever batches
	// the two writes fall in.
	d := s.write(s.db.Append(s.capsule, taskstore.Event{TaskID: t.id, Seq: e.seq, Data: encodeEvent(e)}))
	if !e.progress {
		rec := taskRecord{snapshot: *t.snapshotLocked(), Created: t.created, Seq: e.seq, Egress: t.egress}
		data, _ := json.Marshal(rec)
		d.chs = append(d.chs, s.db.PutTask(taskstore.Task{Capsule: s.capsule, ID: t.id, ContextID: t.contextID, Owner: t.owner, Updated: t.updated,
			Done: terminal(rec.Status.State), State: rec.Status.State, Since: rec.Status.Time, Data: data,
			Digest: t.spec.digest, Mark: t.mark, Claimed: t.born}))
	}
	return d
}

// journal returns t's events with from <= seq <= to from the DB, or false when the
// journal does not hold all of them.
func (s *durableStore) journal(t *task, from, to uint64) ([]event, bool) {
	var out []event
	bad := false
	err := s.db.Events(s.capsule, t.id, from-1, func(je taskstore.Event) bool {
		if je.Seq > to {
			return false
		}
		e, err := decodeEvent(je.Seq, je.Data)
		if err != nil || je.Seq != from+uint64(len(out)) {
			bad = true
			return false
		}
		out = append(out, e)
		return true
	})
	if err != nil || bad || uint64(len(out)) != to-from+1 {
		return nil, false
	}
	return out, true
}

func (s *durableStore) putBlob(t *task, id string, data []byte) *durable {
	return s.write(s.db.PutBlob(s.capsule, t.id, id, data))
}

func (s *durableStore) blob(t *task, id string) ([]byte, bool, error) {
	return s.db.Blob(s.capsule, t.id, id)
}
