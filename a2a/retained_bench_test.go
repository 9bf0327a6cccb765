package a2a

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

// BenchmarkRetainedTasks fills a task store with 100,000 finished tasks (record and four
// journal events each, as a short task leaves them), then starts a handler on it: it
// reports the time of that start (restore), the resident set of a fresh process that
// opened the store and started a handler on it (rss-MB; anon-MB of it is the process's
// own memory, the rest file pages the kernel may drop), the heap that process's handler
// keeps (heap-MB) and the store file's size per task (bytes/task). docs/benchmarks.md
// quotes it.
func BenchmarkRetainedTasks(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "tasks.db")
	fillRetained(b, path, n)
	mem := retainedChild(b, path)
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for b.Loop() {
		if _, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard(), Store: db}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, k := range []string{"open-rss", "open-anon", "rss", "anon", "heap"} {
		b.ReportMetric(mem[k]/1024, k+"-MB")
	}
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/n, "bytes/task")
	}
}

// fillRetained writes n finished tasks to a new store at path and closes it.
func fillRetained(b *testing.B, path string, n int) {
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	capsule := testCard().Name
	now := time.Now()
	var waits []<-chan error
	drain := func() {
		for _, w := range waits {
			if err := <-w; err != nil {
				b.Fatal(err)
			}
		}
		waits = waits[:0]
	}
	for i := range n {
		id := fmt.Sprintf("tsk_%032x", i)
		snap := snapshot{ID: id, ContextID: "ctx_" + id[4:], Status: status{State: stateCompleted, Time: now}, Updated: now,
			History:   []message{{ID: "m" + id, Role: "user", Text: "count the words of this sentence", TaskID: id}},
			Artifacts: []artifact{{ID: "answer", Name: "answer", Text: "The task has 6 words."}}}
		rec, _ := json.Marshal(taskRecord{snapshot: snap, Created: now, Seq: 4})
		waits = append(waits, db.PutTask(taskstore.Task{Capsule: capsule, ID: id, ContextID: snap.ContextID, Updated: now, Done: true, Data: rec}))
		for seq := uint64(1); seq <= 4; seq++ {
			e := event{seq: seq, kind: evStatus, status: status{State: stateWorking, Time: now}}
			waits = append(waits, db.Append(capsule, taskstore.Event{TaskID: id, Seq: seq, Data: encodeEvent(e)}))
		}
		if len(waits) > 20_000 {
			drain()
		}
	}
	drain()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// retainedEnv names the store TestRetainedProcess opens when the benchmark starts it.
const retainedEnv = "CAPSULEGATE_RETAINED_STORE"

// retainedChild runs TestRetainedProcess in a new process of this test binary on the
// store at path, so that the resident set measured is not the filling's, and returns
// its figures in KB.
func retainedChild(b *testing.B, path string) map[string]float64 {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRetainedProcess$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), retainedEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("measuring process: %v\n%s", err, out)
	}
	mem := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "retained:"); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				mem[k], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if mem["rss"] == 0 {
		b.Fatalf("measuring process printed no figures:\n%s", out)
	}
	return mem
}

// TestRetainedProcess is BenchmarkRetainedTasks's measuring process: it opens the store
// named by the environment, starts a handler on it and prints its memory. Run on its
// own it skips.
func TestRetainedProcess(t *testing.T) {
	path := os.Getenv(retainedEnv)
	if path == "" {
		t.Skip("run by BenchmarkRetainedTasks")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := procStatusKB()
	h, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard(), Store: db})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	status := procStatusKB()
	fmt.Printf("retained: open-rss=%.0f open-anon=%.0f rss=%.0f anon=%.0f heap=%.0f\n", opened["VmRSS"], opened["RssAnon"], status["VmRSS"], status["RssAnon"],
		float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/1024)
	runtime.KeepAlive(h)
}

// procStatusKB reads the KB figures of /proc/self/status (none where there is none).
func procStatusKB() map[string]float64 {
	kb := map[string]float64{}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return kb
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			kb[strings.TrimSuffix(f[0], ":")], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return kb
}
