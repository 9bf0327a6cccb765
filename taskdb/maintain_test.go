package taskdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
)

// fill writes tasks a0…a(n-1) of capsule hello, one of capsule other with two push
// configs, two events per task and three turns of one conversation, then closes the store.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprint("a", i)
		tk := task(id, time.Duration(i)*time.Minute)
		tk.Data = make([]byte, 2000) // enough that deleting tasks frees pages
		must(t, db.PutTask(tk))
		must(t, db.Append("hello", taskstore.Event{TaskID: id, Seq: 1, Data: []byte("one")}, taskstore.Event{TaskID: id, Seq: 2, Data: []byte("two")}))
	}
	o := task("b", 0)
	o.Capsule = "other"
	must(t, db.PutTask(o))
	must(t, db.PutPush("other", taskstore.Push{TaskID: "b", ID: "p1", Data: []byte("hook 1")}))
	must(t, db.PutPush("other", taskstore.Push{TaskID: "b", ID: "p2", Data: []byte("hook 2"), Delivered: 3}))
	for i := range 3 {
		must(t, db.AddTurn("hello", "ctx-a0", []byte(fmt.Sprint("turn ", i))))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fill(t, path, 4)
	db := open(t, path, Options{ReadOnly: true})
	r, err := db.Check()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	want := Report{File: path, Bytes: info.Size(), Capsules: 2, Tasks: 5, Events: 8, Conversations: 1, Turns: 3, Pushes: 2}
	if r != want {
		t.Fatalf("Check = %+v, want %+v", r, want)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	fill(t, path, 1)
	a := open(t, path, Options{ReadOnly: true})
	b := open(t, path, Options{ReadOnly: true, LockTimeout: 100 * time.Millisecond}) // readers share the lock
	if _, ok, err := b.Task("hello", "a0"); !ok || err != nil {
		t.Fatalf("read-only Task: %v, %v", ok, err)
	}
	wantCode(t, <-a.PutTask(task("new", 0)), "E-STORE-009")
	_, err := a.Evict("hello", t0, 0, nil)
	wantCode(t, err, "E-STORE-009")
	_, err = Open(path, Options{LockTimeout: 100 * time.Millisecond}) // a writer is excluded
	wantCode(t, err, "E-STORE-002")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(dir, "missing.db")
	_, err = Open(missing, Options{ReadOnly: true})
	wantCode(t, err, "E-STORE-004")
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a read-only Open created the file")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	_, err = Open(empty, Options{ReadOnly: true})
	wantCode(t, err, "E-STORE-001")
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	fill(t, path, 200)
	db := open(t, path, Options{})
	for i := range 190 {
		must(t, db.DeleteTask("hello", fmt.Sprint("a", i)))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	before, after, err := Compact(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !after.sameRecords(before) || after.Tasks != 11 || after.Events != 20 || after.Turns != 3 || after.Pushes != 2 {
		t.Fatalf("before %+v, after %+v", before, after)
	}
	if after.Bytes >= before.Bytes {
		t.Errorf("compact did not shrink the file: %d → %d bytes", before.Bytes, after.Bytes)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != after.Bytes || info.Mode().Perm() != 0o600 {
		t.Fatalf("compacted file: %v, %v", info, err)
	}
	db = open(t, path, Options{})
	if ids := taskIDs(t, db, "hello"); len(ids) != 10 || !ids["a199"] {
		t.Fatalf("tasks after compact: %v", ids)
	}
	if ps, err := db.Pushes("other", "b"); err != nil || len(ps) != 2 || ps[1].Delivered != 3 {
		t.Fatalf("push configs after compact: %+v, %v", ps, err)
	}

	// Held by a gateway: refused, nothing left behind.
	_, _, err = Compact(path, Options{LockTimeout: 100 * time.Millisecond})
	wantCode(t, err, "E-STORE-002")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "tasks.db" && e.Name() != "tasks.db"+logSuffix {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error does not name the file: %v", err)
	}

	_, _, err = Compact(filepath.Join(dir, "missing.db"), Options{})
	wantCode(t, err, "E-STORE-004")
}

// TestOpenAfterCompactRename: a writer that opened the old file and waited for its lock
// while Compact renamed a new file over it ends up on the new file.
func TestOpenAfterCompactRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	fill(t, path, 2)
	other := filepath.Join(dir, "other.db")
	fill(t, other, 3)
	holder := open(t, path, Options{})
	opened := make(chan *DB)
	go func() {
		db, err := Open(path, Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- db
	}()
	time.Sleep(200 * time.Millisecond) // the goroutine now waits on the old file's lock
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	db := <-opened
	if db == nil {
		return
	}
	defer db.Close()
	if ids := taskIDs(t, db, "hello"); len(ids) != 3 {
		t.Fatalf("opened the replaced file: tasks %v", ids)
	}
}
