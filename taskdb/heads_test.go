package taskdb

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
	bolt "go.etcd.io/bbolt"
)

func heads(t *testing.T, db *DB, capsule string) map[string]taskstore.Head {
	t.Helper()
	got := map[string]taskstore.Head{}
	if err := db.Heads(capsule, func(h taskstore.Head) bool { got[h.ID] = h; return true }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHeadsFollowTheTasks: the index holds one entry per task, with the task's context,
// time and finished flag as last written, and loses it with the task (deleted or evicted).
func TestHeadsFollowTheTasks(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	for i := range 4 {
		tk := task(fmt.Sprint(i), time.Duration(i)*time.Hour)
		must(t, db.PutTask(tk))
	}
	done := task("1", 0)
	done.Done = true
	must(t, db.PutTask(done)) // rewritten: finished, updated now
	must(t, db.DeleteTask("hello", "2"))
	if n, err := db.Evict("hello", t0.Add(-150*time.Minute), 0, nil); err != nil || n != 1 { // "3", 3 h old
		t.Fatalf("Evict: %d, %v", n, err)
	}
	got := heads(t, db, "hello")
	want := map[string]taskstore.Head{
		"0": {ID: "0", ContextID: "ctx-0", Updated: t0},
		"1": {ID: "1", ContextID: "ctx-1", Updated: t0, Done: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("heads %v, want %v", got, want)
	}
	if tasks := taskIDs(t, db, "hello"); len(tasks) != len(got) {
		t.Fatalf("tasks %v and heads %v differ", tasks, got)
	}
}

// TestStoreWithoutIndex: a store written before the index existed gets it at open, every
// task in it marked unfinished (so a start reads its record and learns its state).
func TestStoreWithoutIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db := open(t, path, Options{})
	for i := range 3 {
		tk := task(fmt.Sprint(i), 0)
		tk.Done = true
		must(t, db.PutTask(tk))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketHeads) }); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()
	ro := open(t, path, Options{ReadOnly: true})
	if _, err := ro.Check(); err != nil {
		t.Fatalf("Check of a store without the index: %v", err)
	}
	_ = ro.Close()
	db = open(t, path, Options{})
	got := heads(t, db, "hello")
	if len(got) != 3 {
		t.Fatalf("heads after indexing: %v, want 3", got)
	}
	for id, h := range got {
		if h.Done || h.ContextID != "ctx-"+id || !h.Updated.Equal(t0) {
			t.Errorf("head %s: %+v, want unfinished, ctx-%s, %v", id, h, id, t0)
		}
	}
}

// TestCheckFindsAStrayHead: an index entry for no task is damage Check reports.
func TestCheckFindsAStrayHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db := open(t, path, Options{})
	must(t, db.PutTask(task("a", 0)))
	_ = db.Close()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHeads).Put(taskKey("hello", "ghost"), encodeHead(task("ghost", 0)))
	})
	_ = bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	ro := open(t, path, Options{ReadOnly: true})
	_, err = ro.Check()
	wantCode(t, err, taskstore.CodeNotAStore)
}
