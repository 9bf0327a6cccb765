package taskdb

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
	bolt "go.etcd.io/bbolt"
)

// pushes returns the task's configs as "id:data:delivered", in the order Pushes gives.
func pushes(t *testing.T, db *DB, capsule, taskID string) string {
	t.Helper()
	ps, err := db.Pushes(capsule, taskID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		if p.TaskID != taskID {
			t.Errorf("Pushes(%s) gave a config of task %s", taskID, p.TaskID)
		}
		out = append(out, fmt.Sprintf("%s:%s:%d", p.ID, p.Data, p.Delivered))
	}
	return fmt.Sprint(out)
}

func TestPush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(db *DB) <-chan error
		want  string // task t's configs after the write
	}{
		{"nothing", nil, "[b:hook b:0 c:hook c:5]"},
		{"create", func(db *DB) <-chan error {
			return db.PutPush("hello", taskstore.Push{TaskID: "t", ID: "aa", Data: []byte("new")})
		},
			"[aa:new:0 b:hook b:0 c:hook c:5]"},
		{"replace data and delivered", func(db *DB) <-chan error {
			return db.PutPush("hello", taskstore.Push{TaskID: "t", ID: "c", Data: []byte("other"), Delivered: 2})
		}, "[b:hook b:0 c:other:2]"},
		{"raise delivered", func(db *DB) <-chan error { return db.SetDelivered("hello", "t", "c", 9) }, "[b:hook b:0 c:hook c:9]"},
		{"never lower delivered", func(db *DB) <-chan error { return db.SetDelivered("hello", "t", "c", 4) }, "[b:hook b:0 c:hook c:5]"},
		{"delivered of an absent config", func(db *DB) <-chan error { return db.SetDelivered("hello", "t", "zz", 4) }, "[b:hook b:0 c:hook c:5]"},
		{"delete", func(db *DB) <-chan error { return db.DeletePush("hello", "t", "b") }, "[c:hook c:5]"},
		{"delete an absent config", func(db *DB) <-chan error { return db.DeletePush("hello", "t", "zz") }, "[b:hook b:0 c:hook c:5]"},
		{"delete the task", func(db *DB) <-chan error { return db.DeleteTask("hello", "t") }, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
			// taskstore.Task t2's key extends t's, and capsule other has a task t: neither is t's.
			for _, tk := range []taskstore.Task{task("t", 0), task("t2", 0), {Capsule: "other", ID: "t"}} {
				must(t, db.PutTask(tk))
			}
			must(t, db.PutPush("hello", taskstore.Push{TaskID: "t", ID: "c", Data: []byte("hook c"), Delivered: 5}))
			must(t, db.PutPush("hello", taskstore.Push{TaskID: "t", ID: "b", Data: []byte("hook b")}))
			must(t, db.PutPush("hello", taskstore.Push{TaskID: "t2", ID: "a", Data: []byte("hook t2")}))
			must(t, db.PutPush("other", taskstore.Push{TaskID: "t", ID: "a", Data: []byte("hook other")}))
			if tc.write != nil {
				must(t, tc.write(db))
			}
			if got := pushes(t, db, "hello", "t"); got != tc.want {
				t.Errorf("configs %s, want %s", got, tc.want)
			}
			if got := pushes(t, db, "hello", "t2") + pushes(t, db, "other", "t"); got != "[a:hook t2:0][a:hook other:0]" {
				t.Errorf("the other tasks' configs changed: %s", got)
			}
		})
	}
}

func TestAllPushes(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	for _, id := range []string{"t1", "t2"} {
		must(t, db.PutTask(task(id, 0)))
		for _, c := range []string{"a", "b"} {
			must(t, db.PutPush("hello", taskstore.Push{TaskID: id, ID: c}))
		}
	}
	must(t, db.PutTask(taskstore.Task{Capsule: "other", ID: "t1"}))
	must(t, db.PutPush("other", taskstore.Push{TaskID: "t1", ID: "x"}))
	for _, tc := range []struct {
		limit int
		want  string
	}{
		{0, "[t1/a t1/b t2/a t2/b]"},
		{3, "[t1/a t1/b t2/a]"},
	} {
		var got []string
		err := db.AllPushes("hello", func(p taskstore.Push) bool {
			got = append(got, p.TaskID+"/"+p.ID)
			return tc.limit == 0 || len(got) < tc.limit
		})
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("AllPushes (limit %d) = %v, %v; want %s", tc.limit, got, err, tc.want)
		}
	}
}

// TestPutPushWithoutTask: a config for a task the store does not hold is refused with
// E-STORE-011, alone: the writes of its batch commit, one for a task stored earlier in
// the same batch included.
func TestPutPushWithoutTask(t *testing.T) {
	// MaxBatch 3 and a long window make the three writes below exactly one batch.
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{MaxBatch: 3, GroupWindow: time.Minute})
	put := db.PutTask(task("a", 0))
	ghost := db.PutPush("hello", taskstore.Push{TaskID: "ghost", ID: "p"})
	ok := db.PutPush("hello", taskstore.Push{TaskID: "a", ID: "p", Data: []byte("hook")})
	must(t, put)
	wantCode(t, <-ghost, taskstore.CodeNoTask)
	must(t, ok)
	if got := pushes(t, db, "hello", "a") + pushes(t, db, "hello", "ghost"); got != "[p:hook:0][]" {
		t.Fatalf("configs %s", got)
	}

	// A task deleted meanwhile: refused, and its config is gone with it.
	db = open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	must(t, db.PutTask(task("a", 0)))
	must(t, db.PutPush("hello", taskstore.Push{TaskID: "a", ID: "p"}))
	must(t, db.DeleteTask("hello", "a"))
	must(t, db.SetDelivered("hello", "a", "p", 1)) // not an error
	wantCode(t, <-db.PutPush("hello", taskstore.Push{TaskID: "a", ID: "p"}), taskstore.CodeNoTask)
	if got := pushes(t, db, "hello", "a"); got != "[]" {
		t.Fatalf("configs of a deleted task: %s", got)
	}
}

func TestEvictRemovesPushes(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	for h := range 3 {
		id := fmt.Sprint(h)
		must(t, db.PutTask(task(id, time.Duration(h)*time.Hour)))
		must(t, db.PutPush("hello", taskstore.Push{TaskID: id, ID: "p"}))
	}
	keep := func(id string) bool { return id == "2" }
	if n, err := db.Evict("hello", t0.Add(-30*time.Minute), 0, keep); err != nil || n != 1 {
		t.Fatalf("EvictExcept: %d, %v", n, err)
	}
	var left []string
	if err := db.AllPushes("hello", func(p taskstore.Push) bool { left = append(left, p.TaskID); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[0 2]" {
		t.Fatalf("configs left for tasks %v, want [0 2]", left)
	}
}

func TestOwner(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	a, anon := task("a", 0), task("anon", 0)
	a.Owner = "alice"
	must(t, db.PutTask(a))
	must(t, db.PutTask(anon))
	for id, want := range map[string]string{"a": "alice", "anon": ""} {
		if got, ok, err := db.Task("hello", id); !ok || err != nil || got.Owner != want {
			t.Errorf("task %s: owner %q (%v, %v), want %q", id, got.Owner, ok, err, want)
		}
		if h := heads(t, db, "hello")[id]; h.Owner != want {
			t.Errorf("head %s: owner %q, want %q", id, h.Owner, want)
		}
	}
}

// TestStoreBeforeOwnersAndPush: a store written by the release before owners and push
// configs (version 1 task and index values, no "push" bucket) reads read-only with owner
// "" and no configs, and a writable open adds the bucket.
func TestStoreBeforeOwnersAndPush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := task("old", 0)
	old.Done, old.State, old.Since = true, "completed", t0
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, n := range [][]byte{bucketFormat, bucketTasks, bucketEvents, bucketTurns, bucketHeads} {
			if _, err := tx.CreateBucket(n); err != nil {
				return err
			}
		}
		key := taskKey("hello", "old")
		for _, kv := range []struct{ bucket, k, v []byte }{
			{bucketFormat, formatKey, []byte{formatVersion}},
			{bucketTasks, key, encodeTaskV1(old)},
			{bucketHeads, key, encodeHeadV1(old)},
			{bucketEvents, seqKey(key, 1), encodeEvent(taskstore.Event{TaskID: "old", Seq: 1, Data: []byte("e")})},
			{bucketTurns, seqKey(taskKey("hello", "ctx-old"), 0), encodeTurn([]byte("hi"))},
		} {
			if err := tx.Bucket(kv.bucket).Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		return nil
	})
	_ = bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	read := func(db *DB) {
		t.Helper()
		got, ok, err := db.Task("hello", "old")
		if !ok || err != nil || !sameTask(got, old) {
			t.Fatalf("old task: %+v, %v, %v", got, ok, err)
		}
		if h := heads(t, db, "hello")["old"]; !sameHead(h, headOf(old)) {
			t.Fatalf("old head: %+v", h)
		}
		if turns, err := db.Turns("hello", "ctx-old"); err != nil || len(turns) != 1 {
			t.Fatalf("old turns: %q, %v", turns, err)
		}
	}

	ro := open(t, path, Options{ReadOnly: true})
	read(ro)
	if got := pushes(t, ro, "hello", "old"); got != "[]" {
		t.Fatalf("configs of a store without the bucket: %s", got)
	}
	if err := ro.AllPushes("hello", func(taskstore.Push) bool { t.Error("a config"); return true }); err != nil {
		t.Fatal(err)
	}
	if r, err := ro.Check(); err != nil || r.Tasks != 1 || r.Events != 1 || r.Pushes != 0 {
		t.Fatalf("Check: %+v, %v", r, err)
	}
	_ = ro.Close()

	db := open(t, path, Options{})
	read(db)
	must(t, db.PutPush("hello", taskstore.Push{TaskID: "old", ID: "p", Data: []byte("hook")}))
	if got := pushes(t, db, "hello", "old"); got != "[p:hook:0]" {
		t.Fatalf("configs after the bucket was added: %s", got)
	}
}

// TestCheckFindsAStrayPush: a config for no task, or under another config's key, is
// damage Check reports.
func TestCheckFindsAStrayPush(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		p    taskstore.Push
	}{
		{"for no task", itemKey("hello", "ghost", "p"), taskstore.Push{TaskID: "ghost", ID: "p"}},
		{"under another key", itemKey("hello", "a", "p"), taskstore.Push{TaskID: "a", ID: "q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			db := open(t, path, Options{})
			must(t, db.PutTask(task("a", 0)))
			_ = db.Close()
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPush).Put(tc.key, encodePush(tc.p)) })
			_ = bdb.Close()
			if err != nil {
				t.Fatal(err)
			}
			ro := open(t, path, Options{ReadOnly: true})
			_, err = ro.Check()
			wantCode(t, err, taskstore.CodeNotAStore)
		})
	}
}
