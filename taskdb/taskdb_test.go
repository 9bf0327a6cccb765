package taskdb

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

func open(t *testing.T, path string, opts Options) *DB {
	t.Helper()
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func must(t *testing.T, ch <-chan error) {
	t.Helper()
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if errs.Code(err) != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 123, time.UTC)

func task(id string, age time.Duration) taskstore.Task {
	return taskstore.Task{Capsule: "hello", ID: id, ContextID: "ctx-" + id, Updated: t0.Add(-age), Data: []byte("data of " + id)}
}

func taskIDs(t *testing.T, db *DB, capsule string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	if err := db.Tasks(capsule, func(tk taskstore.Task) bool { got[tk.ID] = true; return true }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{MaxTurns: 3})
	a, b := task("a", 0), task("b", time.Hour)
	b.Capsule = "other"
	must(t, db.PutTask(a))
	must(t, db.PutTask(b))
	must(t, db.Append("hello", taskstore.Event{TaskID: "a", Seq: 1, Data: []byte("one")}, taskstore.Event{TaskID: "a", Seq: 2, Data: []byte("two")}))
	for i := range 5 {
		must(t, db.AddTurn("hello", "ctx-a", []byte(fmt.Sprint("turn ", i))))
	}

	got, ok, err := db.Task("hello", "a")
	if err != nil || !ok || got.ContextID != a.ContextID || !got.Updated.Equal(a.Updated) || !bytes.Equal(got.Data, a.Data) {
		t.Fatalf("Task = %+v, %v, %v; want %+v", got, ok, err, a)
	}
	if _, ok, _ := db.Task("hello", "b"); ok {
		t.Fatal("task b of capsule other found under capsule hello")
	}
	if ids := taskIDs(t, db, "other"); len(ids) != 1 || !ids["b"] {
		t.Fatalf("Tasks(other) = %v", ids)
	}
	turns, err := db.Turns("hello", "ctx-a")
	if err != nil || fmt.Sprintf("%s", turns) != "[turn 2 turn 3 turn 4]" {
		t.Fatalf("Turns = %s, %v; want the last three", turns, err)
	}

	must(t, db.DeleteTask("hello", "a"))
	if _, ok, _ := db.Task("hello", "a"); ok {
		t.Fatal("deleted task still found")
	}
	n := 0
	if err := db.Events("hello", "a", 0, func(taskstore.Event) bool { n++; return true }); err != nil || n != 0 {
		t.Fatalf("deleted task's journal: %d events, %v", n, err)
	}
}

func TestEventOrder(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	// Sequences whose little-endian or decimal order differs from numeric order, written
	// out of order over several batches, next to a task whose id extends this one's.
	for _, seqs := range [][]uint64{{256, 1}, {1000, 2}, {65536, 255, 3}} {
		var evs []taskstore.Event
		for _, s := range seqs {
			evs = append(evs, taskstore.Event{TaskID: "t", Seq: s, Data: []byte(fmt.Sprint(s))}, taskstore.Event{TaskID: "t2", Seq: s})
		}
		must(t, db.Append("hello", evs...))
	}
	for _, tc := range []struct {
		after uint64
		limit int
		want  string
	}{
		{0, 0, "[1 2 3 255 256 1000 65536]"},
		{3, 0, "[255 256 1000 65536]"},
		{4, 2, "[255 256]"},
		{65536, 0, "[]"},
	} {
		var got []uint64
		err := db.Events("hello", "t", tc.after, func(e taskstore.Event) bool {
			if e.TaskID != "t" || string(e.Data) != fmt.Sprint(e.Seq) {
				t.Errorf("event %+v", e)
			}
			got = append(got, e.Seq)
			return tc.limit == 0 || len(got) < tc.limit
		})
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("Events(after %d) = %v, %v; want %s", tc.after, got, err, tc.want)
		}
	}
}

func TestBadIDs(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	long := string(bytes.Repeat([]byte("x"), taskstore.MaxIDLen+1))
	ok := string(bytes.Repeat([]byte("\x01/.."), taskstore.MaxIDLen/4)) // any text up to the limit is data (no NUL: taskstore.CheckID)
	must(t, db.PutTask(taskstore.Task{Capsule: "c", ID: ok}))
	if _, found, err := db.Task("c", ok); err != nil || !found {
		t.Fatalf("a %d-byte id of odd bytes: %v, %v", len(ok), found, err)
	}
	for name, call := range map[string]func() error{
		"PutTask long id":      func() error { return <-db.PutTask(taskstore.Task{Capsule: "c", ID: long}) },
		"PutTask empty id":     func() error { return <-db.PutTask(taskstore.Task{Capsule: "c"}) },
		"PutTask long context": func() error { return <-db.PutTask(taskstore.Task{Capsule: "c", ID: "a", ContextID: long}) },
		"Append long task id":  func() error { return <-db.Append("c", taskstore.Event{TaskID: long}) },
		"AddTurn long context": func() error { return <-db.AddTurn("c", long, nil) },
		"DeleteTask long id":   func() error { return <-db.DeleteTask("c", long) },
		"Task long capsule":    func() error { _, _, err := db.Task(long, "a"); return err },
		"Events long id":       func() error { return db.Events("c", long, 0, nil) },
		"Turns long context":   func() error { _, err := db.Turns("c", long); return err },
		"Evict empty capsule":  func() error { _, err := db.Evict("", t0, 0, nil); return err },
		"PutTask long owner":   func() error { return <-db.PutTask(taskstore.Task{Capsule: "c", ID: "a", Owner: long}) },
		"PutPush long id":      func() error { return <-db.PutPush("c", taskstore.Push{TaskID: "a", ID: long}) },
		"PutPush empty id":     func() error { return <-db.PutPush("c", taskstore.Push{TaskID: "a"}) },
		"PutPush empty task":   func() error { return <-db.PutPush("c", taskstore.Push{ID: "p"}) },
		"SetDelivered long id": func() error { return <-db.SetDelivered("c", "a", long, 1) },
		"DeletePush empty id":  func() error { return <-db.DeletePush("c", "a", "") },
		"Pushes long task id":  func() error { _, err := db.Pushes("c", long); return err },
		"AllPushes no capsule": func() error { return db.AllPushes("", nil) },
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), "E-STORE-003") })
	}
}

func TestEvict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		olderThan time.Duration // before t0
		max       int
		want      string // tasks left, by age in hours
	}{
		{"nothing old", 100 * time.Hour, 0, "map[0:true 1:true 2:true 3:true]"},
		{"by age", 90 * time.Minute, 0, "map[0:true 1:true]"},
		{"by count", 100 * time.Hour, 3, "map[0:true 1:true 2:true]"},
		{"both", 150 * time.Minute, 1, "map[0:true]"},
		{"all", -time.Hour, 0, "map[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
			for h := range 4 {
				tk := task(fmt.Sprint(h), time.Duration(h)*time.Hour)
				must(t, db.PutTask(tk))
				must(t, db.Append("hello", taskstore.Event{TaskID: tk.ID, Seq: 1}))
				must(t, db.AddTurn("hello", tk.ContextID, []byte("hi")))
			}
			must(t, db.PutTask(taskstore.Task{Capsule: "other", ID: "old", Updated: t0.Add(-1000 * time.Hour)}))
			n, err := db.Evict("hello", t0.Add(-tc.olderThan), tc.max, nil)
			left := taskIDs(t, db, "hello")
			if err != nil || fmt.Sprint(left) != tc.want || n != 4-len(left) {
				t.Fatalf("Evict removed %d (%v), left %v; want %s", n, err, left, tc.want)
			}
			for h := range 4 {
				id := fmt.Sprint(h)
				events, turns := 0, 0
				_ = db.Events("hello", id, 0, func(taskstore.Event) bool { events++; return true })
				tr, _ := db.Turns("hello", "ctx-"+id)
				turns = len(tr)
				if want := map[bool]int{true: 1, false: 0}[left[id]]; events != want || turns != want {
					t.Errorf("task %s: %d events, %d turns, want %d", id, events, turns, want)
				}
			}
			if ids := taskIDs(t, db, "other"); !ids["old"] {
				t.Error("Evict reached another capsule's tasks")
			}
		})
	}
}

// TestGroupCommit releases 200 writers together: their writes must share commits.
func TestGroupCommit(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	const writers = 200
	start := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			<-start
			errc <- <-db.Append("hello", taskstore.Event{TaskID: fmt.Sprint("t", i%10), Seq: uint64(i), Data: make([]byte, 300)})
		})
	}
	// Readers run alongside: they see committed snapshots and never block the committer.
	for range 4 {
		wg.Go(func() {
			<-start
			for i := range 50 {
				if err := db.Events("hello", fmt.Sprint("t", i%10), 0, func(taskstore.Event) bool { return true }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := db.Stats()
	if st.Ops != writers || st.Commits >= st.Ops {
		t.Fatalf("Stats = %+v, want %d ops in fewer commits", st, writers)
	}
	t.Logf("%d writes in %d commits", st.Ops, st.Commits)
}

// TestHurry: with a window far longer than the test, writes nobody waits for stay
// queued together, and Hurry commits all of them at once, in one commit.
func TestHurry(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{GroupWindow: time.Hour})
	var chans []<-chan error
	for i := range 3 {
		chans = append(chans, db.Append("hello", taskstore.Event{TaskID: "t", Seq: uint64(i + 1), Data: []byte("x")}))
	}
	for i, ch := range chans {
		if len(ch) != 0 {
			t.Fatalf("write %d committed before anyone hurried (window of an hour)", i)
		}
	}
	db.Hurry()
	for i, ch := range chans {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second): // a bound, not a wait: the window is an hour
			t.Fatalf("write %d not committed after Hurry", i)
		}
	}
	if st := db.Stats(); st.Ops != 3 || st.Commits != 1 {
		t.Errorf("Stats = %+v, want 3 writes in 1 commit", st)
	}
}

func TestFailedCommitReachesEveryWaiter(t *testing.T) {
	// MaxBatch 3 and a long window make the three writes below exactly one batch.
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{MaxBatch: 3, GroupWindow: time.Minute})
	boom := errors.New("boom")
	chans := []<-chan error{
		db.PutTask(task("a", 0)),
		db.enqueue(func(*view) error { return boom }),
		db.AddTurn("hello", "ctx-a", []byte("hi")),
	}
	for i, ch := range chans {
		if err := <-ch; errs.Code(err) != "E-STORE-005" || !errors.Is(err, boom) {
			t.Errorf("waiter %d got %v, want E-STORE-005 wrapping boom", i, err)
		}
	}
	if _, ok, _ := db.Task("hello", "a"); ok {
		t.Error("a write of the failed batch was kept")
	}
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Unawaited writes too: Close commits what is queued.
	db.PutTask(task("a", 0))
	db.Append("hello", taskstore.Event{TaskID: "a", Seq: 7})
	db.AddTurn("hello", "ctx-a", []byte("hi"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-db.PutTask(task("b", 0)), "E-STORE-006")
	checkHolds(t, open(t, path, Options{}))
}

// checkHolds checks what TestReopen and TestCrashCopy wrote.
func checkHolds(t *testing.T, db *DB) {
	t.Helper()
	if _, ok, err := db.Task("hello", "a"); !ok || err != nil {
		t.Fatalf("task a: %v, %v", ok, err)
	}
	var seqs []uint64
	_ = db.Events("hello", "a", 0, func(e taskstore.Event) bool { seqs = append(seqs, e.Seq); return true })
	turns, _ := db.Turns("hello", "ctx-a")
	if fmt.Sprint(seqs) != "[7]" || len(turns) != 1 {
		t.Fatalf("events %v, turns %q", seqs, turns)
	}
}

func TestCrashCopy(t *testing.T) {
	// A copy of the file and its log taken while the store is open, after committed
	// writes, is what a crash at that moment leaves on disk: before the writes' checkpoint
	// (they are in the log alone) and after it (in the file alone).
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"in the log", Options{CheckpointEvery: time.Hour}},
		{"checkpointed", Options{CheckpointBytes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := open(t, filepath.Join(dir, "tasks.db"), tc.opts)
			must(t, db.PutTask(task("a", 0)))
			must(t, db.Append("hello", taskstore.Event{TaskID: "a", Seq: 7}))
			must(t, db.AddTurn("hello", "ctx-a", []byte("hi")))
			// A write is answered before the checkpoint that follows its commit, and the
			// committer finishes that checkpoint before it takes the next op: once this
			// no-op is answered, no checkpoint runs while the two files are copied, so the
			// copies show one moment (a checkpoint between them lost the turn).
			must(t, db.enqueue(func(*view) error { return nil }))
			cp := filepath.Join(dir, "copy.db")
			copyFile(t, db.Path(), cp)
			copyFile(t, db.Path()+logSuffix, cp+logSuffix)
			if st := db.Stats(); (st.Checkpoints > 0) != (tc.opts.CheckpointBytes == 1) {
				t.Fatalf("Stats = %+v", st)
			}
			// Open moves the log's writes into the file and empties the log; a read-only
			// open reads them from the log.
			ro := open(t, cp, Options{ReadOnly: true})
			checkHolds(t, ro)
			if _, err := ro.Check(); err != nil {
				t.Fatal(err)
			}
			_ = ro.Close()
			checkHolds(t, open(t, cp, Options{}))
			if info, err := os.Stat(cp + logSuffix); err != nil || info.Size() != 0 {
				t.Fatalf("the copy's log after Open: %v, %v", info, err)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLogTail: a record cut short or torn by a crash was never acknowledged: Open drops
// it and keeps every whole record before it.
func TestLogTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail func(rec []byte) []byte
	}{
		{"cut short", func(rec []byte) []byte { return rec[:len(rec)-3] }},
		{"header only", func(rec []byte) []byte { return rec[:recHeader-2] }},
		{"torn", func(rec []byte) []byte { rec[len(rec)-1] ^= 0xff; return rec }},
		{"zeroes", func(rec []byte) []byte { return make([]byte, 4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tasks.db")
			db := open(t, path, Options{CheckpointEvery: time.Hour})
			must(t, db.PutTask(task("a", 0)))
			must(t, db.Append("hello", taskstore.Event{TaskID: "a", Seq: 7}))
			must(t, db.AddTurn("hello", "ctx-a", []byte("hi")))
			before, err := os.ReadFile(path + logSuffix)
			if err != nil {
				t.Fatal(err)
			}
			must(t, db.PutTask(task("b", 0)))
			after, err := os.ReadFile(path + logSuffix)
			if err != nil {
				t.Fatal(err)
			}
			cp := filepath.Join(dir, "copy.db")
			copyFile(t, path, cp)
			torn := append(before, tc.tail(bytes.Clone(after[len(before):]))...)
			if err := os.WriteFile(cp+logSuffix, torn, 0o600); err != nil {
				t.Fatal(err)
			}
			c := open(t, cp, Options{})
			checkHolds(t, c)
			if _, ok, _ := c.Task("hello", "b"); ok {
				t.Error("the torn record's task was kept")
			}
			// The log was emptied: a write after the torn tail is read back after a restart.
			must(t, c.PutTask(task("c", 0)))
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := open(t, cp, Options{}).Task("hello", "c"); !ok {
				t.Error("a write after the torn tail was lost")
			}
		})
	}
}

// TestLogOldEpoch: records whose checkpoint the file holds are not laid over it again,
// even when the log was not emptied (a crash between the checkpoint and the truncation).
func TestLogOldEpoch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	db := open(t, path, Options{CheckpointEvery: time.Hour})
	old := task("a", 0)
	must(t, db.PutTask(old))
	must(t, db.AddTurn("hello", "ctx-a", []byte("first")))
	stale, err := os.ReadFile(path + logSuffix)
	if err != nil || len(stale) == 0 {
		t.Fatalf("log %d bytes, %v", len(stale), err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path, Options{CheckpointEvery: time.Hour})
	must(t, db.DeleteTask("hello", "a"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+logSuffix, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	db = open(t, path, Options{})
	if _, ok, _ := db.Task("hello", "a"); ok {
		t.Error("a record of a checkpointed epoch brought a deleted task back")
	}
	if turns, _ := db.Turns("hello", "ctx-a"); len(turns) != 1 {
		t.Errorf("turns %q, want the one", turns)
	}
}

// TestLogDamage: a whole record (its checksum holds) that does not parse, or that holds a
// value no record decodes from, is damage, refused at Open with E-STORE-001 naming the
// log, read-write or read-only.
func TestLogDamage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(r *record)
	}{
		{"no such bucket", func(r *record) { r.b = append(r.b, byte(nBuckets), recPut) }},
		{"a task that does not decode", func(r *record) { r.put(bTasks, taskKey("hello", "a"), []byte{0xff, 1, 2}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tasks.db")
			db := open(t, path, Options{})
			_ = db.Close()
			var r record
			r.reset(99)
			tc.write(&r)
			if err := os.WriteFile(path+logSuffix, r.seal(), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{true, false} {
				_, err := Open(path, Options{ReadOnly: ro})
				wantCode(t, err, taskstore.CodeNotAStore)
				if err == nil || !strings.Contains(err.Error(), path+logSuffix) {
					t.Errorf("read-only %t: error does not name the log: %v", ro, err)
				}
			}
		})
	}
}

// TestReadsAcrossCheckpoints: readers running while the committer writes and checkpoints
// all the time never miss a write they have seen acknowledged, nor see one twice.
func TestReadsAcrossCheckpoints(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{CheckpointBytes: 2000})
	const writes = 300
	var acked atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range writes {
			must(t, db.Append("hello", taskstore.Event{TaskID: "t", Seq: uint64(i + 1), Data: make([]byte, 100)}))
			acked.Store(uint64(i + 1))
		}
	})
	for range 3 {
		wg.Go(func() {
			for acked.Load() < writes {
				want := acked.Load()
				var seqs []uint64
				if err := db.Events("hello", "t", 0, func(e taskstore.Event) bool { seqs = append(seqs, e.Seq); return true }); err != nil {
					t.Error(err)
					return
				}
				if uint64(len(seqs)) < want {
					t.Errorf("read %d events after %d were acknowledged", len(seqs), want)
					return
				}
				for i, s := range seqs {
					if s != uint64(i+1) {
						t.Errorf("event %d has seq %d", i, s)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if st := db.Stats(); st.Checkpoints < 5 {
		t.Errorf("Stats = %+v, want many checkpoints", st)
	}
}

func TestNewFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	open(t, path, Options{})
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", info.Mode(), err)
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to an open file, so a second Open in this process meets the
	// same lock another gateway process would. bbolt retries every 50 ms.
	const wait = 200 * time.Millisecond
	start := time.Now()
	_, err = Open(path, Options{LockTimeout: wait})
	wantCode(t, err, "E-STORE-002")
	if d := time.Since(start); d < wait-50*time.Millisecond {
		t.Errorf("refused after %s, before the lock timeout", d)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, path, Options{LockTimeout: wait})
}

// storeBytes returns the bytes of a closed store holding n tasks.
func storeBytes(t *testing.T, n int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		db.PutTask(taskstore.Task{Capsule: "hello", ID: fmt.Sprint("task-", i), Data: bytes.Repeat([]byte{byte(i)}, 200)})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// boltFile returns the bytes of a bbolt file that fn wrote.
func boltFile(t *testing.T, fn func(tx *bolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()
	b, _ := os.ReadFile(path)
	return b
}

func TestRefusedFiles(t *testing.T) {
	store := storeBytes(t, 500)
	pageSize := os.Getpagesize()
	damaged := bytes.Clone(store)
	for i := 4 * pageSize; i < len(damaged); i++ {
		damaged[i] = byte(i * 7)
	}
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(i*31 + i>>8)
	}
	for _, tc := range []struct {
		name string
		data []byte
		code string
	}{
		{"garbage", garbage, "E-STORE-001"},
		{"json", []byte(`{"tasks": []}`), "E-STORE-001"},
		{"truncated to half", store[:len(store)/2], "E-STORE-001"},
		{"truncated to 100 bytes", store[:100], "E-STORE-001"},
		{"truncated to the meta pages", store[:2*pageSize], "E-STORE-001"},
		{"damaged pages", damaged, "E-STORE-001"},
		{"another bbolt file", boltFile(t, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		}), "E-STORE-001"},
		{"a later format", boltFile(t, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketFormat)
			if err != nil {
				return err
			}
			return b.Put(formatKey, []byte{formatVersion + 1})
		}), "E-STORE-001"},
		{"a later record version", func() []byte {
			return boltFile(t, func(tx *bolt.Tx) error {
				for _, n := range [][]byte{bucketFormat, bucketTasks, bucketEvents, bucketTurns} {
					if _, err := tx.CreateBucket(n); err != nil {
						return err
					}
				}
				_ = tx.Bucket(bucketFormat).Put(formatKey, []byte{formatVersion})
				return tx.Bucket(bucketTasks).Put(taskKey("c", "t"), []byte{taskVersion + 1})
			})
		}(), "E-STORE-001"},
		{"a damaged push config", func() []byte {
			return boltFile(t, func(tx *bolt.Tx) error {
				for _, n := range [][]byte{bucketFormat, bucketTasks, bucketEvents, bucketTurns, bucketPush} {
					if _, err := tx.CreateBucket(n); err != nil {
						return err
					}
				}
				_ = tx.Bucket(bucketFormat).Put(formatKey, []byte{formatVersion})
				return tx.Bucket(bucketPush).Put(itemKey("c", "t", "p"), []byte{pushVersion, 1})
			})
		}(), "E-STORE-001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path, Options{})
			if err == nil {
				db.Close()
			}
			wantCode(t, err, tc.code)
			if e := errs.Find(err, tc.code); e.Pos != path || e.Fix == "" {
				t.Errorf("error %q does not name the file and a fix", err)
			}
			t.Log(err)
		})
	}
	t.Run("a missing folder", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "no", "tasks.db"), Options{})
		wantCode(t, err, "E-STORE-004")
	})
	t.Run("negative option", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "tasks.db"), Options{MaxTurns: -1})
		wantCode(t, err, "E-STORE-008")
	})
}

func TestCallbackPanicIsTheCallers(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	must(t, db.PutTask(task("a", 0)))
	defer func() {
		if r := recover(); r != "mine" {
			t.Fatalf("recovered %v, want the callback's own panic", r)
		}
		if _, ok, err := db.Task("hello", "a"); !ok || err != nil { // the read was rolled back
			t.Fatalf("store unusable after a callback panic: %v, %v", ok, err)
		}
	}()
	_ = db.Tasks("hello", func(taskstore.Task) bool { panic("mine") })
}
