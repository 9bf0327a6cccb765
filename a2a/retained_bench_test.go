package a2a

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/taskdb"
)

// BenchmarkRetainedTasks fills a task store with 100,000 finished tasks (record and four
// journal events each, as a short task leaves them), then starts a handler on it and
// reports the heap the handler keeps (heap-MB), the process's resident set (rss-MB) and
// the store file's size per task (bytes/task). docs/benchmarks.md quotes it.
func BenchmarkRetainedTasks(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "tasks.db")
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	capsule := testCard().Name
	now := time.Now()
	var waits []<-chan error
	for i := range n {
		id := fmt.Sprintf("tsk_%032x", i)
		snap := snapshot{ID: id, ContextID: "ctx_" + id[4:], Status: status{State: stateCompleted, Time: now}, Updated: now,
			History:   []message{{ID: "m" + id, Role: "user", Text: "count the words of this sentence", TaskID: id}},
			Artifacts: []artifact{{ID: "answer", Name: "answer", Text: "The task has 6 words."}}}
		rec, _ := json.Marshal(taskRecord{snapshot: snap, Created: now, Seq: 4})
		waits = append(waits, db.PutTask(taskdb.Task{Capsule: capsule, ID: id, ContextID: snap.ContextID, Updated: now, Data: rec}))
		for seq := uint64(1); seq <= 4; seq++ {
			e := event{seq: seq, kind: evStatus, status: status{State: stateWorking, Time: now}}
			waits = append(waits, db.Append(capsule, taskdb.Event{TaskID: id, Seq: seq, Data: encodeEvent(e)}))
		}
		if len(waits) > 20_000 {
			for _, w := range waits {
				if err := <-w; err != nil {
					b.Fatal(err)
				}
			}
			waits = waits[:0]
		}
	}
	for _, w := range waits {
		if err := <-w; err != nil {
			b.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	var h *Handler
	for b.Loop() {
		if h, err = NewHandler(Config{Executor: &echoExec{}, Card: testCard(), Store: db}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/(1<<20), "heap-MB")
	b.ReportMetric(rssMB(), "rss-MB")
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/n, "bytes/task")
	}
	runtime.KeepAlive(h)
	_ = db.Close()
}

// rssMB is the process's resident set in MB, from /proc (0 where there is none).
func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
