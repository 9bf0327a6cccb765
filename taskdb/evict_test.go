package taskdb

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestEvictKeep: a kept task is never removed, whatever its age, does not count
// towards the limit, and its conversation's turns stay.
func TestEvictKeep(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "tasks.db"), Options{})
	for h := range 4 {
		tk := task(fmt.Sprint(h), time.Duration(h)*time.Hour)
		must(t, db.PutTask(tk))
		must(t, db.AddTurn("hello", tk.ContextID, []byte("hi")))
	}
	keep := func(id string) bool { return id == "3" } // the oldest
	n, err := db.Evict("hello", t0.Add(-90*time.Minute), 1, keep)
	left := taskIDs(t, db, "hello")
	if err != nil || n != 2 || fmt.Sprint(left) != "map[0:true 3:true]" {
		t.Fatalf("Evict removed %d (%v), left %v", n, err, left)
	}
	if tr, _ := db.Turns("hello", "ctx-3"); len(tr) != 1 {
		t.Errorf("the kept task's turns: %d, want 1", len(tr))
	}
}
