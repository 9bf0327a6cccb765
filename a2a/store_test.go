package a2a

import (
	"slices"
	"testing"
)

// TestMemoryStore: tasks stay until they end; then the most recently used finished ones
// are kept, a read counting as a use; threaded turns are per context.
func TestMemoryStore(t *testing.T) {
	s := newMemoryStore(2)
	tasks := map[string]*task{}
	for _, id := range []string{"a", "b", "c", "live"} {
		tasks[id] = &task{id: id, contextID: "ctx_" + id}
		s.add(tasks[id])
	}
	s.ended(tasks["a"])
	s.ended(tasks["b"])
	s.get("a") // a is now used more recently than b
	s.ended(tasks["c"])
	for id, want := range map[string]bool{"a": true, "b": false, "c": true, "live": true, "nope": false} {
		if got := s.get(id) != nil; got != want {
			t.Errorf("get(%s) found %v, want %v", id, got, want)
		}
	}
	var ids []string
	s.each(func(t *task) { ids = append(ids, t.id) })
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "c", "live"}) {
		t.Errorf("each saw %v", ids)
	}
	s.addTurn("ctx_a", Turn{User: "hi", Agent: "hello"})
	if got := s.turns("ctx_a"); len(got) != 1 || got[0].Agent != "hello" {
		t.Errorf("turns %v", got)
	}
	if got := s.turns("ctx_other"); got == nil || len(got) != 0 {
		t.Errorf("turns of an unknown context %#v", got)
	}
}
