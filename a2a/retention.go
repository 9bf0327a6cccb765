package a2a

import (
	"log/slog"
	"sync"
	"time"
)

// sweepInterval is how often the retention sweeper runs: a 24th of the retention, at
// most an hour, at least a second.
func sweepInterval(retention time.Duration) time.Duration {
	every := time.Hour
	if retention > 0 {
		every = min(retention/24, time.Hour)
	}
	return max(every, time.Second)
}

// sweeps schedules a handler's retention sweeps on a timer rather than a goroutine of
// its own: a gateway hosting thousands of capsules keeps no goroutine per capsule idle.
type sweeps struct {
	sweepMu      sync.Mutex
	sweepTimer   *time.Timer
	sweepStopped bool
	sweeping     sync.WaitGroup // a sweep in progress
}

// startSweeps runs sweep every sweepInterval until stopSweeps.
func (h *Handler) startSweeps() {
	h.sweepMu.Lock()
	defer h.sweepMu.Unlock()
	h.sweepTimer = time.AfterFunc(sweepInterval(h.cfg.Retention), h.sweepTick)
}

// sweepTick is one timed sweep; it schedules the next unless the sweeps have stopped.
func (h *Handler) sweepTick() {
	h.sweepMu.Lock()
	if h.sweepStopped {
		h.sweepMu.Unlock()
		return
	}
	h.sweeping.Add(1)
	h.sweepMu.Unlock()
	h.sweep(time.Now())
	h.sweeping.Done()
	h.sweepMu.Lock()
	defer h.sweepMu.Unlock()
	if !h.sweepStopped {
		h.sweepTimer.Reset(sweepInterval(h.config().Retention))
	}
}

// stopSweeps stops the sweeps, waits for one in progress and closes h.swept; the store
// may then close. Later calls wait for the first.
func (h *Handler) stopSweeps() {
	h.sweepMu.Lock()
	first := !h.sweepStopped
	h.sweepStopped = true
	h.sweepTimer.Stop()
	h.sweepMu.Unlock()
	if !first {
		<-h.swept
		return
	}
	h.sweeping.Wait()
	close(h.swept)
}

// sweep removes from the durable store the tasks past Config.Retention or MaxTasks as
// of now (taskstore.Store.Evict). The tasks not finished yet, all of which are in
// memory, are spared: the set is taken under h.mu, the removal runs without it. A task
// admitted in between is the newest and updated just now, so neither bound reaches it.
// A removed task still in memory stays readable until the memory store forgets it.
func (h *Handler) sweep(now time.Time) {
	h.mu.Lock()
	ds, ok := h.store.(*durableStore)
	retention, maxTasks, logger := h.cfg.Retention, h.cfg.MaxTasks, h.cfg.Logger
	if !ok || (retention <= 0 && maxTasks <= 0) || (h.fleet != nil && !h.fleet.db.Leader()) {
		// In a fleet one replica at a time sweeps: the one leading it.
		h.mu.Unlock()
		return
	}
	live := map[string]bool{}
	ds.each(func(t *task) {
		t.mu.Lock()
		if !terminal(t.st.State) {
			live[t.id] = true
		}
		t.mu.Unlock()
	})
	h.mu.Unlock()
	var olderThan time.Time // the zero time: no task is older
	if retention > 0 {
		olderThan = now.Add(-retention)
	}
	n, err := ds.db.Evict(ds.capsule, olderThan, maxTasks, func(id string) bool { return live[id] })
	if err != nil {
		logger.Warn("cannot remove old tasks from the task store", slog.String("capsule", ds.capsule), slog.Any("error", err))
		return
	}
	if n > 0 {
		logger.Debug("removed old tasks from the task store", slog.String("capsule", ds.capsule), slog.Int("removed", n),
			slog.Duration("retention", retention), slog.Int("max_tasks", maxTasks))
	}
}
