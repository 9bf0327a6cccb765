package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

// buildStore writes a store of two capsules: 30 tasks of hello (20 then deleted, so
// compact has pages to free) with two events each, one task of other, and three turns.
func buildStore(t *testing.T, path string) {
	t.Helper()
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(ch <-chan error) {
		t.Helper()
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for i := range 30 {
		id := fmt.Sprint("t", i)
		must(db.PutTask(taskstore.Task{Capsule: "hello", ID: id, ContextID: "ctx", Updated: now, Data: make([]byte, 4000)}))
		must(db.Append("hello", taskstore.Event{TaskID: id, Seq: 1, Data: []byte("one")}, taskstore.Event{TaskID: id, Seq: 2, Data: []byte("two")}))
	}
	// Closed and opened again between: the 30 tasks reach the file (a checkpoint) before
	// 20 of them go, leaving the free pages compact removes.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = taskdb.Open(path, taskdb.Options{}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		must(db.DeleteTask("hello", fmt.Sprint("t", i)))
	}
	must(db.PutTask(taskstore.Task{Capsule: "other", ID: "x", Updated: now, Data: []byte("x")}))
	for i := range 3 {
		must(db.AddTurn("hello", "ctx", []byte(fmt.Sprint("turn ", i))))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

type storeJSON struct {
	OK            bool   `json:"ok"`
	File          string `json:"file"`
	Bytes         int64  `json:"bytes"`
	BytesBefore   int64  `json:"bytes_before"`
	BytesAfter    int64  `json:"bytes_after"`
	Capsules      int    `json:"capsules"`
	Tasks         int    `json:"tasks"`
	Events        int    `json:"events"`
	Conversations int    `json:"conversations"`
	Turns         int    `json:"turns"`
	Errors        []struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Position string `json:"position"`
	} `json:"errors"`
}

func storeOut(t *testing.T, r result) storeJSON {
	t.Helper()
	var j storeJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	return j
}

// TestStoreCheckCompact drives `caddy capsule store check|compact` on a store built
// with taskdb: counts, a truncated copy refused, compact keeping every record, and
// compact refused while the store is held.
func TestStoreCheckCompact(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	os.MkdirAll(home, 0o755)
	path := filepath.Join(tmp, "tasks.db")
	buildStore(t, path)
	size := func(p string) int64 {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}

	r := capsule(t, home, "store", "check", path)
	if r.code != 0 || !strings.Contains(r.stdout, "2 capsules, 11 tasks, 20 events, 3 turns in 1 conversations") {
		t.Fatalf("check: %+v", r)
	}
	r = capsule(t, home, "store", "check", "--json", path)
	want := storeJSON{OK: true, File: path, Bytes: size(path), Capsules: 2, Tasks: 11, Events: 20, Conversations: 1, Turns: 3}
	if j := storeOut(t, r); r.code != 0 || fmt.Sprint(j) != fmt.Sprint(want) {
		t.Fatalf("check --json: %d %+v, want %+v", r.code, j, want)
	}

	// A truncated copy is refused, naming the file.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(tmp, "bad.db")
	os.WriteFile(bad, data[:len(data)/2], 0o600)
	r = capsule(t, home, "store", "check", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "E-STORE-001") || !strings.Contains(r.stderr, bad) {
		t.Fatalf("check of a truncated file: %+v", r)
	}
	r = capsule(t, home, "store", "check", "--json", bad)
	if j := storeOut(t, r); r.code != 1 || j.OK || len(j.Errors) != 1 || j.Errors[0].Code != "E-STORE-001" || !strings.Contains(j.Errors[0].Message, bad) {
		t.Fatalf("check --json of a truncated file: %+v", r)
	}
	if r := capsule(t, home, "store", "check"); r.code != 2 {
		t.Fatalf("check without a file: %+v", r)
	}
	if r := capsule(t, home, "store", "check", "--registry", tmp, path); r.code != 2 {
		t.Fatalf("store check took --registry: %+v", r)
	}

	// Compact keeps every record in a smaller file.
	before := size(path)
	r = capsule(t, home, "store", "compact", "--json", path)
	j := storeOut(t, r)
	if r.code != 0 || j.BytesBefore != before || j.BytesAfter != size(path) || j.BytesAfter >= before || j.Tasks != 11 || j.Events != 20 || j.Turns != 3 {
		t.Fatalf("compact: %+v (%+v)", j, r)
	}
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	db.Tasks("hello", func(taskstore.Task) bool { n++; return true })
	ev := 0
	db.Events("hello", "t25", 0, func(taskstore.Event) bool { ev++; return true })
	turns, _ := db.Turns("hello", "ctx")
	if n != 10 || ev != 2 || len(turns) != 3 {
		t.Fatalf("after compact: %d tasks, %d events of t25, %d turns", n, ev, len(turns))
	}

	// Held by a gateway (here: this test's open store): refused, the file untouched.
	held := size(path)
	r = capsule(t, home, "store", "compact", path)
	if r.code != 1 || !strings.Contains(r.stderr, "E-STORE-002") || !strings.Contains(r.stderr, path) {
		t.Fatalf("compact of a held store: %+v", r)
	}
	if size(path) != held {
		t.Fatal("a refused compact changed the file")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".compact-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
