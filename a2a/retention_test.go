package a2a

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

// putRecord writes a task record with the given state, last updated at updated, as a
// previous process would have left it.
func putRecord(t *testing.T, db *taskdb.DB, id, state string, updated time.Time) {
	t.Helper()
	snap := snapshot{ID: id, ContextID: "ctx_" + id, Status: status{State: state, Time: updated}, Updated: updated,
		History: []message{{ID: "m_" + id, Role: "user", Text: "go", TaskID: id, ContextID: "ctx_" + id}}}
	data, _ := json.Marshal(taskRecord{snapshot: snap, Created: updated, Seq: 2})
	if err := <-db.PutTask(taskstore.Task{Capsule: testCard().Name, ID: id, ContextID: "ctx_" + id, Updated: updated, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// seed creates the store at path holding the records put, closed again.
func seed(t *testing.T, path string, put func(db *taskdb.DB)) {
	t.Helper()
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// storedIDs returns the ids of the capsule's tasks in db.
func storedIDs(t *testing.T, db *taskdb.DB) string {
	t.Helper()
	var ids []string
	if err := db.Tasks(testCard().Name, func(tk taskstore.Task) bool { ids = append(ids, tk.ID); return true }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ids)
}

// TestInterruptedMetric: a task left working by the previous process is counted once
// when it is ended interrupted, not again at the next start.
func TestInterruptedMetric(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	seed(t, path, func(db *taskdb.DB) {
		putRecord(t, db, "tsk_w", stateWorking, time.Now())
		putRecord(t, db, "tsk_c", stateCompleted, time.Now())
	})
	metrics, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		g := openGenWith(t, path, Config{Executor: newDurableExec(), Metrics: metrics, MaxTasks: 10})
		g.stop() // idle: the shutdown that returns at once
		select {
		case <-g.h.swept:
		default:
			t.Fatal("the sweeper still runs after Shutdown")
		}
		if got := testutil.ToFloat64(metrics.Interrupted.WithLabelValues(testCard().Name)); got != 1 {
			t.Fatalf("capsule_tasks_interrupted_total = %v, want 1", got)
		}
	}
}

// TestRetention: the sweep at start removes the finished tasks past retention, then the
// oldest beyond max tasks; a later sweep (now injected) spares the running task; a
// removed task stays readable until the memory store forgets it; Shutdown stops the
// sweeper.
func TestRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	now := time.Now()
	seed(t, path, func(db *taskdb.DB) {
		putRecord(t, db, "tsk_old", stateCompleted, now.Add(-8*24*time.Hour))
		for h := 4; h >= 1; h-- {
			putRecord(t, db, fmt.Sprintf("tsk_%d", h), stateCompleted, now.Add(-time.Duration(h)*time.Hour))
		}
	})
	exec := newDurableExec()
	t.Cleanup(func() { close(exec.release) })
	g := openGenWith(t, path, Config{Executor: exec, Retention: 7 * 24 * time.Hour, MaxTasks: 3})
	if got := storedIDs(t, g.db); got != "[tsk_1 tsk_2 tsk_3]" {
		t.Fatalf("after the first sweep the store holds %s, want the 3 newest", got)
	}
	// Still in memory: readable. Once forgotten there, gone.
	ok(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": "tsk_old"}))
	g.h.mu.Lock()
	g.h.store.(*durableStore).mem = newMemoryStore(keepFinished)
	g.h.mu.Unlock()
	fails(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": "tsk_old"}), codeTaskNotFound)
	fails(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": "tsk_4"}), codeTaskNotFound)

	// A running task, then a sweep a month later: everything finished goes, it stays.
	ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hang"), "configuration": map[string]any{"blocking": false}}))
	hung := recv(t, exec.started)
	g.h.sweep(now.Add(30 * 24 * time.Hour))
	if got := storedIDs(t, g.db); got != fmt.Sprint([]string{hung}) {
		t.Fatalf("after a sweep a month on the store holds %s, want only the running %s", got, hung)
	}
	got := decode[tObj](t, ok(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": hung})))
	if terminal(parseState(got.Status.State)) {
		t.Fatalf("the running task: %+v", got)
	}

	// A task limit of 1 with the running task and a newer finished one: the running one
	// does not count, the finished one stays.
	done := decode[tObj](t, ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	cfg := g.h.config()
	cfg.Retention, cfg.MaxTasks = 0, 1
	if err := g.h.Update(cfg); err != nil {
		t.Fatal(err)
	}
	g.h.sweep(now.Add(30 * 24 * time.Hour))
	if got := storedIDs(t, g.db); len(got) < 2 || !strings.Contains(got, hung) || !strings.Contains(got, done.ID) {
		t.Fatalf("max tasks 1 left %s, want %s and %s", got, hung, done.ID)
	}

	g.stop() // a task still runs: the shutdown that cancels it
	select {
	case <-g.h.swept:
	default:
		t.Fatal("the sweeper still runs after Shutdown")
	}
}

// TestSweepInterval: a 24th of the retention, at most an hour, at least a second.
func TestSweepInterval(t *testing.T) {
	for retention, want := range map[time.Duration]time.Duration{
		0: time.Hour, 168 * time.Hour: time.Hour, 2 * time.Hour: 5 * time.Minute, time.Second: time.Second,
	} {
		if got := sweepInterval(retention); got != want {
			t.Errorf("sweepInterval(%s) = %s, want %s", retention, got, want)
		}
	}
}

// TestRetentionRange: negative bounds are refused.
func TestRetentionRange(t *testing.T) {
	for _, cfg := range []Config{{Retention: -time.Hour}, {MaxTasks: -1}} {
		cfg.Card, cfg.Executor = testCard(), newDurableExec()
		if _, err := NewHandler(cfg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%+v: %v, want refused as negative", cfg, err)
		}
	}
}
