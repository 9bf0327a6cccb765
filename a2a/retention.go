package a2a

import (
	"log/slog"
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

// sweeper runs sweep every sweepInterval until the handler stops (Shutdown), then
// closes h.swept.
func (h *Handler) sweeper() {
	defer close(h.swept)
	for {
		timer := time.NewTimer(sweepInterval(h.config().Retention))
		select {
		case <-h.base.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		h.sweep(time.Now())
	}
}

// sweep removes from the durable store the tasks past Config.Retention or MaxTasks as
// of now (taskdb.DB.EvictExcept). The tasks not finished yet, all of which are in
// memory, are spared: the set is taken under h.mu, the removal runs without it. A task
// admitted in between is the newest and updated just now, so neither bound reaches it.
// A removed task still in memory stays readable until the memory store forgets it.
func (h *Handler) sweep(now time.Time) {
	h.mu.Lock()
	ds, ok := h.store.(*durableStore)
	retention, maxTasks, logger := h.cfg.Retention, h.cfg.MaxTasks, h.cfg.Logger
	if !ok || (retention <= 0 && maxTasks <= 0) {
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
	n, err := ds.db.EvictExcept(ds.capsule, olderThan, maxTasks, func(id string) bool { return live[id] })
	if err != nil {
		logger.Warn("cannot remove old tasks from the task store", slog.String("capsule", ds.capsule), slog.Any("error", err))
		return
	}
	if n > 0 {
		logger.Debug("removed old tasks from the task store", slog.String("capsule", ds.capsule), slog.Int("removed", n),
			slog.Duration("retention", retention), slog.Int("max_tasks", maxTasks))
	}
}
