package a2a

import (
	"container/list"
	"slices"
)

// store is what the handler knows of its tasks beyond running them: the live tasks and
// the turns of its threaded conversations, in memory (docs/architecture.md "Tasks and
// contexts"). memoryStore is all there is without a Config.Store; durableStore
// (durable.go) is the same memory as a cache over a taskstore.Store, which every change is
// written to and which a task the memory no longer holds is read back from. The handler
// calls it holding Handler.mu, so an implementation need not lock — except published and
// journal, called holding only the task's lock.
type store interface {
	// add files a task just admitted.
	add(t *task)
	// get returns the task with id, or nil when it is unknown or forgotten; a read counts
	// as a use.
	get(id string) *task
	// ended files a task that reached a terminal state.
	ended(t *task)
	// each calls f for every task the store still knows.
	each(f func(*task))
	// turns returns the completed turns of a threaded context, oldest first (empty, not nil).
	turns(contextID string) []Turn
	// addTurn appends one completed turn to a context.
	addTurn(contextID string, t Turn)
	// published records the event t just published (t.mu held: the one place every
	// event passes, task.publishLocked) and returns its write, nil when there is none to
	// wait for.
	published(t *task, e event) *durable
	// journal returns t's events with from <= seq <= to from a durable journal (t.mu
	// held), or false when it does not hold them all.
	journal(t *task, from, to uint64) ([]event, bool)
	// putPush, dropPush and pushDelivered record a task's push configs and their delivery
	// cursors, returning the write (nil: nothing to wait for); pushes reads a task's
	// stored configs. Like published they touch nothing but the store, and are called
	// holding the task's lock (docs/reference/a2a.md "Push notifications").
	putPush(t *task, ps *pushState) *durable
	dropPush(t *task, id string) *durable
	pushDelivered(t *task, id string, seq uint64) *durable
	pushes(t *task) []pushRow
	// putBlob keeps data as the blob id of t (t.mu held), returning its write; blob reads
	// it back. A task's blobs go with it.
	putBlob(t *task, id string, data []byte) *durable
	blob(t *task, id string) ([]byte, bool, error)
}

// memoryStore keeps everything in memory: every task until it ends, then the maxFinished
// finished tasks used most recently; the turns of the contexts used most recently.
type memoryStore struct {
	tasks       map[string]*task
	finished    *list.List // terminal tasks, most recently used first
	finishedAt  map[*task]*list.Element
	maxFinished int
	threads     turnStore
}

func newMemoryStore(maxFinished int) *memoryStore {
	return &memoryStore{tasks: map[string]*task{}, finished: list.New(), finishedAt: map[*task]*list.Element{},
		maxFinished: maxFinished, threads: newTurnStore()}
}

func (s *memoryStore) add(t *task) { s.tasks[t.id] = t }

func (s *memoryStore) get(id string) *task {
	t := s.tasks[id]
	if e := s.finishedAt[t]; e != nil {
		s.finished.MoveToFront(e)
	}
	return t
}

// ended files t among the finished tasks, forgetting the least recently used beyond
// maxFinished.
func (s *memoryStore) ended(t *task) {
	t.hold.release()
	if s.finishedAt[t] == nil {
		s.finishedAt[t] = s.finished.PushFront(t)
	}
	for s.finished.Len() > s.maxFinished {
		old := s.finished.Remove(s.finished.Back()).(*task)
		delete(s.finishedAt, old)
		delete(s.tasks, old.id)
	}
}

// forget drops t from memory: a mirror of a fleet's task, read again from the store when
// next asked for.
func (s *memoryStore) forget(t *task) {
	if e := s.finishedAt[t]; e != nil {
		s.finished.Remove(e)
		delete(s.finishedAt, t)
	}
	delete(s.tasks, t.id)
}

func (s *memoryStore) each(f func(*task)) {
	for _, t := range s.tasks {
		f(t)
	}
}

func (s *memoryStore) turns(contextID string) []Turn { return s.threads.get(contextID) }

func (s *memoryStore) addTurn(contextID string, t Turn) { s.threads.add(contextID, t) }

func (s *memoryStore) published(*task, event) *durable { return nil }

func (s *memoryStore) journal(*task, uint64, uint64) ([]event, bool) { return nil, false }

// The memory store keeps push configs on their tasks only.
func (s *memoryStore) putPush(*task, *pushState) *durable           { return nil }
func (s *memoryStore) dropPush(*task, string) *durable              { return nil }
func (s *memoryStore) pushDelivered(*task, string, uint64) *durable { return nil }
func (s *memoryStore) pushes(*task) []pushRow                       { return nil }

// Bounds of threaded conversation history, so a chatty client cannot grow it forever.
const (
	maxContexts = 1000 // contexts kept, least recently used dropped
	maxTurns    = 100  // turns kept per context, oldest dropped
)

// bounded is th without its messages when they exceed MaxThreadMessages (and then not
// compacted: there is no compacted conversation left to start from).
func (th Thread) bounded() Thread {
	if len(th.Messages) > MaxThreadMessages {
		th.Messages, th.Compacted = nil, false
	}
	return th
}

// turnStore keeps the completed turns of threaded conversations per context id.
type turnStore struct {
	byID map[string]*list.Element
	lru  *list.List // of *contextTurns, most recently used first
}

type contextTurns struct {
	id    string
	turns []Turn
}

func newTurnStore() turnStore {
	return turnStore{byID: map[string]*list.Element{}, lru: list.New()}
}

// get returns a copy of the context's turns, oldest first (empty, not nil).
func (s *turnStore) get(id string) []Turn {
	e := s.byID[id]
	if e == nil {
		return []Turn{}
	}
	s.lru.MoveToFront(e)
	return slices.Clone(e.Value.(*contextTurns).turns)
}

func (s *turnStore) add(id string, t Turn) {
	e := s.byID[id]
	if e == nil {
		e = s.lru.PushFront(&contextTurns{id: id})
		s.byID[id] = e
		for s.lru.Len() > maxContexts {
			old := s.lru.Remove(s.lru.Back()).(*contextTurns)
			delete(s.byID, old.id)
		}
	}
	s.lru.MoveToFront(e)
	c := e.Value.(*contextTurns)
	c.turns = append(c.turns, t)
	if len(c.turns) > maxTurns {
		c.turns = slices.Delete(c.turns, 0, len(c.turns)-maxTurns)
	}
}

// The memory store keeps a task's blobs on the task, so they go when it is forgotten.
func (s *memoryStore) putBlob(t *task, id string, data []byte) *durable {
	if t.blobs == nil {
		t.blobs = map[string][]byte{}
	}
	t.blobs[id] = data
	return nil
}

func (s *memoryStore) blob(t *task, id string) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.blobs[id]
	return b, ok, nil
}
