package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Several gateways as one service (docs/reference/a2a.md "Several gateways"): with a
// taskstore.Fleet as Config.Store, a replica admits a task by writing it queued; whichever
// replica has a free slot claims it, in its context's order, and runs it. A task another
// replica runs, or that is queued, is a mirror here: its state and its events come from
// the store, read again when the store signals that its journal grew, so a subscriber
// here gets the runner's events in order, none missed, none twice. A cancel, an answer to
// input-required or a push config meant for a task another replica runs is passed on as
// a signal. A replica whose lease runs out leaves orphans, which a survivor adopts: it
// ends them failed "interrupted: gateway <name> stopped while this task ran", or, never
// started, gives them back to the queue.

// fleetRun is a handler's part in the fleet.
type fleetRun struct {
	db       taskstore.Fleet
	digest   string
	versions taskstore.Versions
	kick     chan struct{}
	unwatch  func()
	claimed  chan struct{} // closed when the claim loop has ended

	mu       sync.Mutex
	adopting map[string]bool // orphans being adopted, so that one signal's worth runs at a time
	// pending says the store may hold tasks this replica could claim: set by what may
	// queue one or make one claimable (a task queued, a context freed, a missed signal),
	// cleared when a claim found fewer than it asked for. A slot freed here claims only
	// then, so that a replica running what it admits asks the store for nothing more.
	pending atomic.Bool
	// queued says the store held tasks queued for a claim when last heard of: set by a
	// task queued anywhere, and as the last claim found. While it is set, a task admitted
	// here queues behind them rather than run here first, and a task ending anywhere
	// wakes the claims (its context may be what a queued one waits for).
	queued atomic.Bool
}

// fleetOf returns the store as a Fleet when it is one replica of several.
func fleetOf(db taskstore.Store) taskstore.Fleet {
	if f, ok := db.(taskstore.Fleet); ok && f.Instance() != "" {
		return f
	}
	return nil
}

// cancelWait bounds how long a cancel received here waits for the replica running the
// task to confirm it.
const cancelWait = 10 * time.Second

// startFleet joins the handler to the fleet: it serves its digest, watches the signals
// and claims queued tasks while it has free slots.
func (h *Handler) startFleet(db taskstore.Fleet) {
	f := &fleetRun{db: db, digest: h.cfg.Digest, versions: h.cfg.Versions, kick: make(chan struct{}, 1),
		claimed: make(chan struct{}), adopting: map[string]bool{}}
	h.fleet = f
	h.cfg.Metrics.fleetFrom0(h.cfg.Card.Name)
	db.Serve(h.cfg.Card.Name, f.digest)
	f.unwatch = db.Watch(h.cfg.Card.Name, h.onSignal)
	go h.claimLoop()
}

// updateFleet takes the version a reload staged (h.mu held): the tasks admitted from now
// on record it, the claims take its tasks, and the other replicas learn it is served here.
func (h *Handler) updateFleetLocked(cfg Config) {
	f := h.fleet
	if f == nil || (f.digest == cfg.Digest && f.versions == cfg.Versions) {
		return
	}
	f.digest, f.versions = cfg.Digest, cfg.Versions
	go func() {
		f.db.Serve(cfg.Card.Name, cfg.Digest)
		f.kickClaim()
	}()
}

// handBack gives the tasks this replica holds but has not started back to the store's
// queue, for the other replicas (a graceful stop; h.mu held, released and taken again).
func (h *Handler) handBackLocked() {
	f := h.fleet
	if f == nil {
		return
	}
	var back []*task
	h.slots.each(func(t *task) {
		t.mu.Lock()
		if t.st.State == stateSubmitted && !t.holdsSlot {
			back = append(back, t)
		}
		t.mu.Unlock()
	})
	for _, t := range back {
		h.unqueueLocked(t)
		t.mu.Lock()
		t.mirror = true
		t.mu.Unlock()
	}
	h.slotMetricsLocked()
	if len(back) == 0 {
		return
	}
	h.mu.Unlock()
	defer h.mu.Lock()
	ids := make([]string, 0, len(back))
	for _, t := range back {
		ids = append(ids, t.id)
	}
	h.requeue(ids)
}

// requeue puts tasks this replica claimed but will not run back in the store's queue,
// for the other replicas (h.mu not held).
func (h *Handler) requeue(ids []string) {
	f := h.fleet
	for _, id := range ids {
		if ok, err := f.db.Requeue(h.spec.capsule, id, f.db.Instance()); err != nil || !ok {
			h.cfg.Logger.Warn("a2a: a task not started could not be handed back; the lease's end does it", "task", id, "error", err)
			continue
		}
		_ = f.db.Signal(taskstore.Signal{Kind: taskstore.SignalEvents, Capsule: h.spec.capsule, TaskID: id, Arg: stateSubmitted})
	}
}

// stopFleet ends the claim loop and the watch (halt).
func (h *Handler) stopFleet() {
	f := h.fleet
	if f == nil {
		return
	}
	f.unwatch()
	<-f.claimed
	f.db.Serve(h.cfg.Card.Name, "")
}

// depth is how many tasks a replica with concurrency slots holds at most, running or
// waiting here for a slot: its slots and fleetAhead more, so that a slot that frees
// starts a task at once and one claim (a commit) brings many tasks rather than one. The
// rest wait in the store, for whichever replica has room first.
func (f *fleetRun) depth(concurrency int) int { return concurrency + fleetAhead }

// fleetAhead is how many tasks a replica holds waiting for its slots: enough that claims
// keep up with fast tasks, few enough that a slow replica holds back little of the queue.
const fleetAhead = 16

// kickClaim wakes the claim loop: the store may hold tasks to claim.
func (f *fleetRun) kickClaim() {
	f.pending.Store(true)
	f.slotFreed()
}

// slotFreed wakes the claim loop, which claims only when the store may hold tasks.
func (f *fleetRun) slotFreed() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// claimLoop claims queued tasks while the handler has free slots: when woken (a task
// queued or a context freed, here or on another replica) and every lease/3 in case a
// signal was missed.
func (h *Handler) claimLoop() {
	f := h.fleet
	defer close(f.claimed)
	tick := time.NewTicker(max(f.db.Lease()/3, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-f.kick:
		case <-tick.C:
			f.pending.Store(true) // a signal may have been missed
		case <-h.base.Done():
			return
		}
		for h.base.Err() == nil && f.pending.Load() {
			// A claim is a commit: it waits until the tasks held here are down to a round
			// of the slots, then brings as many as make up the depth again.
			h.mu.Lock()
			conc := h.cfg.Lifecycle.Concurrency
			free := f.depth(conc) - h.slots.active - len(h.slots.waiting)
			low := len(h.slots.waiting) <= conc
			closing, name, digest, versions := h.closing, h.cfg.Card.Name, f.digest, f.versions
			h.mu.Unlock()
			if free <= 0 || !low || closing || h.storeReady() != nil {
				break // a database away: the next tick, or the resync once signals flow again, retries
			}
			f.pending.Store(false) // what is queued from now on sets it again
			got, more, err := f.db.Claim(name, digest, versions, free)
			if err != nil {
				f.pending.Store(true)
				h.cfg.Logger.Warn("a2a: claiming queued tasks", "error", err)
				break
			}
			var back []string
			for _, c := range got {
				if !h.runClaimed(c) {
					back = append(back, c.ID)
				}
			}
			// A shutdown began while the claim was on its way: what it brought goes
			// back, as what was held here already did (handBackLocked).
			h.requeue(back)
			f.queued.Store(more)
			if more && len(got) == free {
				f.pending.Store(true) // there may be more to claim now
			}
		}
	}
}

// runClaimed runs a task this replica just claimed: the mirror it keeps of it, or the
// task restored from its record, placed in its line. It reports false for a task to
// hand back: the handler began to shut down while the claim was on its way.
func (h *Handler) runClaimed(c taskstore.Claimed) bool {
	ds := h.store.(*durableStore)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	t, err := h.localize(ds, c.Task)
	if err != nil {
		h.cfg.Logger.Error("a2a: a claimed task cannot be read", "task", c.ID, "error", err)
		return true
	}
	t.mu.Lock()
	t.prevMark, t.prevRunner = c.PrevMark, c.PrevRunner
	if c.Pushes {
		t.pushes, t.pushesLoaded = nil, false // filed on any replica: read with the task
		h.loadPushesLocked(t)
	} else {
		t.pushes, t.pushesLoaded = nil, true
	}
	for _, ps := range t.pushes {
		h.startPushLocked(t, ps)
	}
	state := t.st.State
	t.mu.Unlock()
	if state != stateSubmitted {
		// Ended meanwhile (canceled before the claim took): nothing to run.
		return true
	}
	h.spec.metrics.claimed(h.spec.capsule)
	h.placeLocked(t, time.Now())
	return true
}

// localize makes rec's task one this replica runs (h.mu held): the mirror kept of it,
// brought up to the record, or the task restored from the record, its replay buffer
// rebuilt from the journal.
func (h *Handler) localize(ds *durableStore, rec taskstore.Task) (*task, error) {
	r, err := decodeRecord(rec)
	if err != nil {
		return nil, err
	}
	t := ds.mem.tasks[rec.ID]
	if t == nil {
		if t, err = ds.restore(rec); err != nil {
			return nil, err
		}
		ds.mem.add(t)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spec = h.spec
	t.store = ds
	if t.seq != r.Seq || t.ringFreed || len(t.ring) != int(min(t.seq, uint64(t.ringSize))) {
		t.seq = r.Seq
		t.ringFreed = false
		if r.Seq == 1 {
			// A task queued since its admission: its one event is its first snapshot.
			t.ring = []event{{seq: 1, kind: evTask, task: &r.snapshot}}
		} else if !ds.rebuildRing(t) {
			return nil, fmt.Errorf("a2a: the journal of task %s does not hold its %d events", rec.ID, r.Seq)
		}
	}
	t.st, t.history, t.artifacts, t.updated, t.reply = r.Status, r.History, r.Artifacts, r.Updated, r.Reply
	t.mirror = false
	return t, nil
}

// onSignal handles a signal from the store (any goroutine; it must not block).
func (h *Handler) onSignal(sig taskstore.Signal) {
	f := h.fleet
	switch sig.Kind {
	case taskstore.SignalEvents:
		switch {
		case sig.Arg == stateSubmitted:
			f.queued.Store(true)
			f.kickClaim() // a task queued
		case terminal(sig.Arg) && f.queued.Load():
			f.kickClaim() // a context freed, which a queued task may wait for
		}
		go h.refreshMirror(sig.TaskID, sig.Arg)
	case taskstore.SignalCancel:
		go h.cancelSignaled(sig.TaskID)
	case taskstore.SignalAnswer:
		go h.answerSignaled(sig.TaskID, sig.Arg)
	case taskstore.SignalPush:
		go h.pushSignaled(sig.TaskID)
	case taskstore.SignalOrphan:
		f.mu.Lock()
		busy := f.adopting[sig.TaskID]
		f.adopting[sig.TaskID] = true
		f.mu.Unlock()
		if !busy {
			go h.adopt(sig.TaskID, sig.Arg)
		}
	case taskstore.SignalResync:
		f.kickClaim()
		h.mu.Lock()
		var mirrors []*task
		h.store.each(func(t *task) {
			if t.mirror {
				mirrors = append(mirrors, t)
			}
		})
		h.mu.Unlock()
		for _, t := range mirrors {
			go h.refresh(t) // whatever it missed, watched or not
		}
	}
}

// local returns the task id when this replica runs it, nil when it does not.
func (h *Handler) local(id string) *task {
	h.mu.Lock()
	defer h.mu.Unlock()
	ds, ok := h.store.(*durableStore)
	if !ok {
		return nil
	}
	if t := ds.mem.tasks[id]; t != nil && !t.mirror {
		return t
	}
	return nil
}

// refreshMirror brings the mirror of task id up to the store, when someone here watches
// it; an unwatched one is forgotten once the task ended (state, from the signal), and
// otherwise brought up to date when next read.
func (h *Handler) refreshMirror(id, state string) {
	h.mu.Lock()
	ds, _ := h.store.(*durableStore)
	var t *task
	if ds != nil {
		t = ds.mem.tasks[id]
	}
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	// A stream, or an answer passed on, wants every event; one waiting for the task to
	// settle (a blocking send, a cancel) only the signal of a state that settles it.
	mirror := t.mirror
	watched := t.subs > 0 || t.followers > 0 || t.watchers > 0 && settled(state)
	t.mu.Unlock()
	switch {
	case mirror && watched:
		h.refresh(t)
	case mirror && terminal(state):
		h.mu.Lock()
		t.mu.Lock()
		if ds.mem.tasks[id] == t && t.mirror && t.subs == 0 && t.watchers == 0 {
			ds.mem.forget(t)
		}
		t.mu.Unlock()
		h.mu.Unlock()
	}
}

// refresh brings a mirror up to the store: the journal's events it lacks, published to
// its subscribers in order, then the record's state. Refreshes of one task run one at a
// time; one asked for while another runs runs again after it.
func (h *Handler) refresh(t *task) {
	t.mu.Lock()
	if !t.mirror {
		t.mu.Unlock()
		return
	}
	if t.refreshing {
		t.again = true
		t.mu.Unlock()
		return
	}
	t.refreshing = true
	t.mu.Unlock()
	for {
		h.refreshOnce(t)
		t.mu.Lock()
		if !t.again || !t.mirror {
			t.refreshing, t.again = false, false
			t.mu.Unlock()
			return
		}
		t.again = false
		t.mu.Unlock()
	}
}

func (h *Handler) refreshOnce(t *task) {
	ds := h.store.(*durableStore)
	rec, ok, err := ds.db.Task(ds.capsule, t.id)
	if err != nil || !ok {
		h.cfg.Logger.Warn("a2a: a task another gateway runs could not be read again; its waiters read it later", "task", t.id, "error", err)
		return
	}
	r, err := decodeRecord(rec)
	if err != nil {
		return
	}
	t.mu.Lock()
	have := t.seq
	t.mu.Unlock()
	var evs []event
	if r.Seq > have {
		if evs, ok = ds.journal(t, have+1, r.Seq); !ok {
			h.cfg.Logger.Warn("a2a: the journal of a task another gateway runs could not be read; its waiters read it later", "task", t.id, "from", have+1, "to", r.Seq)
			return
		}
	}
	t.mu.Lock()
	if !t.mirror || t.seq != have {
		t.mu.Unlock()
		return // claimed here, or refreshed by another, meanwhile
	}
	for _, e := range evs {
		t.seq = e.seq
		t.ringAppendLocked(e)
	}
	t.st, t.history, t.artifacts, t.updated, t.reply = r.Status, r.History, r.Artifacts, r.Updated, r.Reply
	t.seq = max(t.seq, r.Seq)
	if len(evs) > 0 {
		close(t.changed)
		t.changed = make(chan struct{})
	}
	done := terminal(t.st.State)
	if done {
		t.freeRingLocked()
	}
	t.mu.Unlock()
	if done {
		h.mu.Lock()
		if ds.mem.tasks[t.id] == t { // not forgotten meanwhile
			h.store.ended(t)
		}
		h.mu.Unlock()
	}
}

// mirrorOf returns the task (capsule, id) read from the store as a mirror (h.mu held): a
// task another replica runs or that is queued, its replay buffer holding its journal.
func (s *durableStore) mirrorOf(rec taskstore.Task) *task {
	t, err := s.restore(rec)
	if err != nil {
		return nil
	}
	t.mirror = true
	if !terminal(t.st.State) && !s.rebuildRing(t) {
		return nil
	}
	return t
}

// fresh brings t up to the store when it is a mirror not finished: a read that must show
// what the replica running it did last.
func (h *Handler) fresh(t *task) {
	if t == nil {
		return
	}
	t.mu.Lock()
	stale := t.mirror && !terminal(t.st.State)
	t.mu.Unlock()
	if stale {
		h.refresh(t)
	}
}

// cancelRemote cancels a mirror: a queued task is claimed here and ended at once; one
// another replica runs is signaled to it, and the answer waits (cancelWait) until the
// task ends.
func (h *Handler) cancelRemote(t *task, principal string) (*snapshot, *durable, *rpcError) {
	f := h.fleet
	ds := h.store.(*durableStore)
	rec, ok, err := f.db.ClaimTask(ds.capsule, t.id)
	if err != nil {
		return nil, nil, errStore(err)
	}
	if ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		lt, err := h.localize(ds, rec)
		if err != nil {
			return nil, nil, errStore(err)
		}
		lt.mu.Lock()
		defer lt.mu.Unlock()
		h.cancelLocked(lt, "canceled by the client", time.Now())
		return lt.snapshotLocked(), lt.last, nil
	}
	if err := f.db.Signal(taskstore.Signal{Kind: taskstore.SignalCancel, Capsule: ds.capsule, TaskID: t.id}); err != nil {
		return nil, nil, errStore(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	t.watch()
	defer t.unwatch()
	for {
		h.fresh(t)
		t.mu.Lock()
		st, changed := t.st.State, t.changed
		t.mu.Unlock()
		if terminal(st) {
			return t.snapshot(), nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, newRPCError(codeNotCancelable, "Task not cancelable",
				fmt.Sprintf("task %s is %s on another gateway, which did not confirm the cancelation within 10 s; read the task to see whether it ended", t.id, st),
				map[string]any{"taskId": t.id, "state": st})
		}
	}
}

// cancelSignaled cancels a task this replica runs on another's behalf.
func (h *Handler) cancelSignaled(id string) {
	t := h.local(id)
	if t == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !terminal(t.st.State) && !t.mirror {
		h.cancelLocked(t, "canceled by the client", time.Now())
	}
}

// answerRecord is an answer to input-required passed to the replica running the task, as
// a blob of the task.
type answerRecord struct {
	MessageID, Text string
	Parts           []Part `json:",omitempty"`
}

// answerRemote passes the answer in to the replica running t, which waits for input: a
// blob of the task and a signal naming it.
func (h *Handler) answerRemote(t *task, in incoming) *rpcError {
	ds := h.store.(*durableStore)
	id := ids.New("answer_")
	b, _ := json.Marshal(answerRecord{MessageID: in.messageID, Text: in.text, Parts: in.payload})
	if err := <-ds.db.PutBlob(ds.capsule, t.id, id, b); err != nil {
		return errStore(err)
	}
	if err := h.fleet.db.Signal(taskstore.Signal{Kind: taskstore.SignalAnswer, Capsule: ds.capsule, TaskID: t.id, Arg: id}); err != nil {
		return errStore(err)
	}
	return nil
}

// answerSignaled hands an answer another replica received to the task waiting here.
func (h *Handler) answerSignaled(id, blob string) {
	t := h.local(id)
	if t == nil {
		return
	}
	ds := h.store.(*durableStore)
	b, ok, err := ds.db.Blob(ds.capsule, id, blob)
	var a answerRecord
	if err != nil || !ok || json.Unmarshal(b, &a) != nil {
		h.cfg.Logger.Warn("a2a: an answer passed from another gateway cannot be read", "task", id, "error", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, _, rerr := h.answerLocked(t, incoming{messageID: a.MessageID, text: a.Text, payload: a.Parts}, false, new(*durable), time.Now()); rerr != nil {
		h.cfg.Logger.Warn("a2a: an answer passed from another gateway was refused", "task", id, "error", rerr.Message)
	}
}

// pushSignaled starts the delivery of a push config another replica filed on a task
// this replica runs.
func (h *Handler) pushSignaled(id string) {
	t := h.local(id)
	if t == nil {
		return
	}
	fresh := t.store.pushes(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pushes = slices.DeleteFunc(t.pushes, func(ps *pushState) bool {
		kept := slices.ContainsFunc(fresh, func(r pushRow) bool { return r.ID == ps.cfg.ID })
		if !kept {
			close(ps.gone) // deleted on another replica
		}
		return !kept
	})
	for _, ps := range pushStates(fresh) {
		if findPush(t, ps.cfg.ID) != nil {
			continue // a config replaced on another replica keeps its delivery here
		}
		t.pushes = append(t.pushes, ps)
		h.startPushLocked(t, ps)
	}
}

// adopt takes over the orphan id of the replica from, whose lease ran out: a task it
// claimed but never started goes back to the queue; one it ran ends failed
// "interrupted", counted; a finished one is adopted for the push deliveries it left.
func (h *Handler) adopt(id, from string) {
	f := h.fleet
	defer func() {
		f.mu.Lock()
		delete(f.adopting, id)
		f.mu.Unlock()
	}()
	ds := h.store.(*durableStore)
	if ok, err := f.db.Requeue(ds.capsule, id, from); err == nil && ok {
		f.kickClaim()
		return
	}
	rec, ok, err := f.db.Adopt(ds.capsule, id, from)
	if err != nil || !ok {
		return
	}
	h.mu.Lock()
	t, err := h.localize(ds, rec)
	if err != nil {
		h.mu.Unlock()
		h.cfg.Logger.Error("a2a: an orphaned task cannot be read", "task", id, "gateway", from, "error", err)
		return
	}
	t.mu.Lock()
	t.pushes, t.pushesLoaded = nil, false
	h.loadPushesLocked(t)
	if !terminal(t.st.State) {
		now := time.Now()
		why := interrupted // a task a gateway before the fleet left
		if from != "" {
			why = stoppedWhileRunning(from)
		}
		msg := agentMessage(t, why)
		t.setStatusLocked(status{State: stateFailed, Msg: &msg, Time: now}, now)
		t.spec.metrics.ended(t.spec.capsule, stateFailed)
		t.spec.metrics.failover(t.spec.capsule)
		h.cfg.Logger.Warn("a2a: a task of a gateway that stopped ended interrupted", "task", id, "gateway", from)
	}
	for _, ps := range t.pushes {
		h.startPushLocked(t, ps)
	}
	t.freeRingLocked()
	t.mu.Unlock()
	h.store.ended(t)
	h.mu.Unlock()
	f.kickClaim() // its context is free
}

// stoppedWhileRunning is the status message of a task its gateway stopped under.
func stoppedWhileRunning(gateway string) string {
	return fmt.Sprintf("interrupted: gateway %s stopped while this task ran", gateway)
}

// fleetOpen reads, for a message in a context a client named, the context's unfinished
// tasks across the fleet; nil without a fleet or a context.
func (h *Handler) fleetOpen(in incoming) ([]taskstore.Running, *rpcError) {
	if h.fleet == nil || in.contextID == "" || in.taskID != "" {
		return nil, nil
	}
	open, err := h.fleet.db.Open(h.cfg.Card.Name, in.owner, in.contextID)
	if err != nil {
		return nil, errStore(err)
	}
	return open, nil
}

// watch and unwatch count a waiter on t (a blocking send, a cancel) beside its
// subscribers: a watched mirror is refreshed on every signal of its task.
func (t *task) watch() {
	t.mu.Lock()
	t.watchers++
	t.mu.Unlock()
}

func (t *task) unwatch() {
	t.mu.Lock()
	t.watchers--
	t.mu.Unlock()
}

// remoteWaiting returns the mirror of the task another replica runs that in answers —
// named by its taskId, or waiting for input in its context (open) — nil when the message
// is for this replica to handle.
func (h *Handler) remoteWaiting(in incoming, open []taskstore.Running) (*task, *rpcError) {
	id := in.taskID
	if id == "" {
		for _, r := range open {
			if r.State == stateInputRequired && r.Runner != h.fleet.db.Instance() {
				id = r.ID
				break
			}
		}
		if id == "" {
			return nil, nil
		}
	}
	t := h.lookup(id, caller{principal: in.owner})
	if t == nil {
		return nil, nil // not found: said by the path that handles it here
	}
	t.mu.Lock()
	mirror, contextID := t.mirror, t.contextID
	t.mu.Unlock()
	if !mirror {
		return nil, nil
	}
	if in.contextID != "" && in.contextID != contextID {
		return nil, errInvalidParams(fmt.Sprintf("message.contextId %q is not the context %q of task %s", in.contextID, contextID, t.id))
	}
	return t, nil
}

// sendRemote answers t, waiting for input on another replica: the answer is passed on,
// and the reply waits (cancelWait) until that replica took it.
func (h *Handler) sendRemote(t *task, in incoming, stream bool) (*task, *subscription, *durable, *rpcError) {
	t.mu.Lock()
	t.followers++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.followers--
		t.mu.Unlock()
	}()
	t.mu.Lock()
	st, seq := t.st.State, t.seq
	if st != stateInputRequired {
		t.mu.Unlock()
		if terminal(st) {
			return nil, nil, nil, errUnsupported(fmt.Sprintf("task %s is %s and takes no more messages; send without taskId to start a new task", t.id, st))
		}
		return nil, nil, nil, errUnsupported(fmt.Sprintf("task %s is %s, not waiting for input", t.id, st))
	}
	var w *durable
	if in.push != nil {
		var rerr *rpcError
		if w, rerr = h.attachPushLocked(t, in.push, false); rerr != nil {
			t.mu.Unlock()
			return nil, nil, nil, rerr
		}
	}
	t.mu.Unlock()
	if in.push != nil {
		if err := w.wait(); err != nil {
			return nil, nil, nil, errStore(err)
		}
		h.signalPush(t)
	}
	if rerr := h.answerRemote(t, in); rerr != nil {
		return nil, nil, nil, rerr
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	for {
		h.fresh(t)
		t.mu.Lock()
		if t.seq > seq {
			var sub *subscription
			if stream {
				sub = t.subscribeSnapshotLocked()
			}
			t.mu.Unlock()
			return t, sub, nil, nil
		}
		changed := t.changed
		t.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, nil, errUnsupported(fmt.Sprintf("task %s waits for input on another gateway, which did not take the answer within 10 s; read the task, and send again if it still waits", t.id))
		}
	}
}

// signalPush tells the replica running t (a mirror here) that its push configs changed.
func (h *Handler) signalPush(t *task) {
	if h.fleet == nil {
		return
	}
	t.mu.Lock()
	mirror := t.mirror
	t.mu.Unlock()
	if mirror {
		if err := h.fleet.db.Signal(taskstore.Signal{Kind: taskstore.SignalPush, Capsule: h.cfg.Card.Name, TaskID: t.id}); err != nil {
			h.cfg.Logger.Warn("a2a: the gateway running a task was not told of its push configs", "task", t.id, "error", err)
		}
	}
}
