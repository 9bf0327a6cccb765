package a2a

import (
	"fmt"
	"slices"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
)

// maxWaiting bounds the tasks waiting for a concurrency slot across all contexts, so a
// flood of new contexts is refused instead of piling up.
const maxWaiting = 4096

// line is the tasks of one context (docs/architecture.md "Tasks and contexts"): its
// head runs (or waits for a concurrency slot), the rest wait behind it in order, since
// tasks of a context share its state.
type line struct {
	head  *task
	queue []*task
}

// slots is who runs and who waits: contexts side by side up to the concurrency, the
// tasks of one context in order.
type slots struct {
	lines   map[string]*line
	active  int     // tasks holding a concurrency slot: running, or waiting for input
	waiting []*task // heads of their lines waiting for a slot, oldest first
}

func newSlots() slots { return slots{lines: map[string]*line{}} }

// queued counts the admitted tasks that do not hold a slot.
func (s *slots) queued() int {
	n := len(s.waiting)
	for _, l := range s.lines {
		n += len(l.queue)
	}
	return n
}

// idle reports whether no admitted task is left.
func (s *slots) idle() bool { return s.active == 0 && len(s.waiting) == 0 }

// each calls f for every admitted task that has not ended: heads, then their queues.
func (s *slots) each(f func(*task)) {
	for _, l := range s.lines {
		if l.head != nil {
			f(l.head)
		}
		for _, t := range slices.Clone(l.queue) {
			f(t)
		}
	}
}

// refusal says why a new task of the context with key (contextKey) cannot be admitted
// now ("" when it can).
func (h *Handler) refusalLocked(key string, open []taskstore.Running) string {
	lc := h.cfg.Lifecycle
	// Busy: a task of the context runs or waits; behind: how many more wait after it. In
	// a fleet the store's open tasks of the context (Fleet.Open, read before h.mu) say.
	busy, behind := false, 0
	if h.fleet != nil {
		busy, behind = len(open) > 0, len(open)-1
	} else if l := h.slots.lines[key]; l != nil && l.head != nil {
		busy, behind = true, len(l.queue)
	}
	switch {
	case h.closing:
		return "rejected: the capsule is shutting down; retry later"
	case !busy:
		if h.fleet == nil && len(h.slots.waiting) >= maxWaiting {
			return fmt.Sprintf("rejected: the capsule runs %d tasks and %d more wait for a slot; retry later", h.slots.active, len(h.slots.waiting))
		}
		return ""
	case lc.Acceptance == AcceptQueue && behind < lc.QueueDepth:
		return ""
	case lc.Acceptance == AcceptQueue:
		return fmt.Sprintf("rejected: this context is busy and its queue is full (queue_depth %d); retry later", lc.QueueDepth)
	}
	return "rejected: this context is busy with another task (task_acceptance: single); retry when it ends, or send in another context"
}

// placeLocked puts an admitted task in its context's line: at its head (starting it when
// a slot is free) or behind the task there. The caller holds h.mu and no task's mu.
func (h *Handler) placeLocked(t *task, now time.Time) {
	l := h.slots.lines[t.key]
	if l == nil {
		l = &line{}
		h.slots.lines[t.key] = l
	}
	if l.head != nil {
		l.queue = append(l.queue, t)
		h.slotMetricsLocked()
		return
	}
	l.head = t
	h.slots.waiting = append(h.slots.waiting, t)
	h.fillLocked(now)
}

// fillLocked starts waiting heads, oldest first, while slots are free. The caller holds
// h.mu and no task's mu.
func (h *Handler) fillLocked(now time.Time) {
	for h.slots.active < h.cfg.Lifecycle.Concurrency && len(h.slots.waiting) > 0 {
		t := h.slots.waiting[0]
		h.slots.waiting = h.slots.waiting[1:]
		t.mu.Lock()
		h.startLocked(t, now)
		t.mu.Unlock()
	}
	h.slotMetricsLocked()
	h.checkIdleLocked()
}

// releaseLocked gives back the slot t held, moves its context's next task to the head,
// and starts what now fits.
func (h *Handler) releaseLocked(t *task, now time.Time) {
	if !t.holdsSlot {
		return
	}
	t.holdsSlot = false
	h.slots.active--
	h.advanceLocked(t)
	h.fillLocked(now)
	if h.fleet != nil {
		h.fleet.slotFreed() // another context's task may run here now
	}
}

// advanceLocked takes t off the head of its line; the next task of the context becomes
// the head and waits for a slot.
func (h *Handler) advanceLocked(t *task) {
	l := h.slots.lines[t.key]
	if l == nil || l.head != t {
		return
	}
	if len(l.queue) == 0 {
		delete(h.slots.lines, t.key)
		return
	}
	l.head, l.queue = l.queue[0], l.queue[1:]
	h.slots.waiting = append(h.slots.waiting, l.head)
}

// unqueueLocked removes a task that never started from wherever it waits.
func (h *Handler) unqueueLocked(t *task) {
	l := h.slots.lines[t.key]
	if l == nil {
		return
	}
	if l.head == t {
		h.slots.waiting = slices.DeleteFunc(h.slots.waiting, func(w *task) bool { return w == t })
		h.advanceLocked(t)
		return
	}
	l.queue = slices.DeleteFunc(l.queue, func(q *task) bool { return q == t })
}

func (h *Handler) checkIdleLocked() {
	if h.idle != nil && h.slots.idle() {
		close(h.idle)
		h.idle = nil
	}
}

func (h *Handler) slotMetricsLocked() {
	h.shedQueuedLocked()
	h.spec.metrics.slot(h.spec.capsule, h.slots.active, h.slots.queued())
	if h.fleet != nil && h.spec.metrics != nil {
		h.spec.metrics.Leases.WithLabelValues(h.spec.capsule).Set(float64(len(h.slots.lines)))
	}
}
