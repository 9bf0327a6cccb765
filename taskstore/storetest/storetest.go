// Package storetest is the conformance table of taskstore.Store: any implementation
// passes it by calling Run from a test of its own, with a Backend that opens it. Each
// row runs on a store of its own, kept at a folder of the row's t.TempDir. A store that
// implements taskstore.Pins passes the "runtime pins" row too (RunPins checks one alone).
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Backend is how the table opens, closes and damages the store under test.
type Backend struct {
	// Open opens the store kept at place (an empty folder the first time), creating an
	// empty store there when it holds none; opening the same place again after Close is
	// a restart, and must see every write Close committed.
	Open func(place string) (taskstore.Store, error)
	// Close commits what the store holds and closes it; writes after it are refused
	// with taskstore.CodeClosed.
	Close func(taskstore.Store) error
	// Damage damages the closed store kept at place as a torn write or another
	// program's bytes would; the next Open must refuse it with taskstore.CodeNotAStore
	// rather than read it.
	Damage func(t *testing.T, place string)
}

// rows is the table, in the order Run runs it.
var rows = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"tasks", testTasks},
	{"index", testIndex},
	{"owners", testOwners},
	{"journal replay", testJournal},
	{"turns", testTurns},
	{"push configs and cursors", testPush},
	{"blobs", testBlobs},
	{"retention", testRetention},
	{"restart", testRestart},
	{"corrupt files refused", testCorrupt},
	{"ids refused", testIDs},
	{"concurrent writers", testConcurrent},
	{"closed", testClosed},
	{"runtime pins", testPins},
	{"token budgets", testBudgets},
}

// Run runs the whole conformance table against the stores b opens.
func Run(t *testing.T, b Backend) {
	if b.Open == nil || b.Close == nil || b.Damage == nil {
		t.Fatal("storetest: a Backend needs Open, Close and Damage")
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			h := &harness{t: t, b: b, place: t.TempDir()}
			h.open()
			t.Cleanup(func() {
				if h.s != nil {
					_ = b.Close(h.s)
				}
			})
			r.run(t, h)
		})
	}
}

// harness holds a row's store and the place it is kept.
type harness struct {
	t     *testing.T
	b     Backend
	place string
	s     taskstore.Store
}

func (h *harness) open() {
	h.t.Helper()
	s, err := h.b.Open(h.place)
	if err != nil {
		h.t.Fatalf("opening the store at %s: %v", h.place, err)
	}
	h.s = s
}

func (h *harness) close() {
	h.t.Helper()
	s := h.s
	h.s = nil
	if err := h.b.Close(s); err != nil {
		h.t.Fatalf("closing the store: %v", err)
	}
}

// restart closes the store and opens the same place again.
func (h *harness) restart() {
	h.t.Helper()
	h.close()
	h.open()
}

// waitLimit bounds how long a write's channel may stay silent: a store that never
// answers fails its row instead of hanging the test binary.
const waitLimit = time.Minute

// result receives the one value a write's channel yields.
func result(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	if ch == nil {
		t.Fatalf("%s returned a nil channel: every write yields one value", what)
	}
	select {
	case err := <-ch:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("%s: the write's channel yielded nothing within %s", what, waitLimit)
		return nil
	}
}

// must fails t unless the write succeeds.
func must(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	if err := result(t, what, ch); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantCode fails t unless err carries code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Errorf("%s: got %v, want an error with code %s", what, err, code)
	}
}

// t0 has nanoseconds and no monotonic reading: a store keeps times to the nanosecond.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)

const capsule = "hello"

// task is a task record updated ago before t0, in context "ctx-"+id.
func task(id string, ago time.Duration) taskstore.Task {
	return taskstore.Task{Capsule: capsule, ID: id, ContextID: "ctx-" + id, Updated: t0.Add(-ago), State: "working",
		Since: t0.Add(-ago - time.Second), Data: []byte(`{"id":"` + id + `"}`)}
}

func sameTask(a, b taskstore.Task) bool {
	return a.Capsule == b.Capsule && a.ID == b.ID && a.ContextID == b.ContextID && a.Updated.Equal(b.Updated) &&
		a.Done == b.Done && a.State == b.State && a.Since.Equal(b.Since) && a.Owner == b.Owner && bytes.Equal(a.Data, b.Data)
}

func sameHead(a, b taskstore.Head) bool {
	return a.ID == b.ID && a.ContextID == b.ContextID && a.Updated.Equal(b.Updated) && a.Done == b.Done &&
		a.State == b.State && a.Since.Equal(b.Since) && a.Owner == b.Owner
}

// getTask reads (capsule, id) and fails t on a read error.
func getTask(t *testing.T, s taskstore.Store, c, id string) (taskstore.Task, bool) {
	t.Helper()
	got, ok, err := s.Task(c, id)
	if err != nil {
		t.Fatalf("Task(%q, %q): %v", c, id, err)
	}
	return got, ok
}

// heads returns the capsule's heads by id.
func heads(t *testing.T, s taskstore.Store, c string) map[string]taskstore.Head {
	t.Helper()
	out := map[string]taskstore.Head{}
	if err := s.Heads(c, func(h taskstore.Head) bool {
		if _, dup := out[h.ID]; dup {
			t.Errorf("Heads(%q) gave %q twice", c, h.ID)
		}
		out[h.ID] = h
		return true
	}); err != nil {
		t.Fatalf("Heads(%q): %v", c, err)
	}
	return out
}

// ids is the sorted ids of m, joined by spaces.
func ids[V any](m map[string]V) string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// events returns the Data of the task's events after seq, as "seq:data" words.
func events(t *testing.T, s taskstore.Store, c, id string, after uint64) string {
	t.Helper()
	var out []string
	if err := s.Events(c, id, after, func(e taskstore.Event) bool {
		if e.TaskID != id {
			t.Errorf("Events(%q, %q) gave an event of task %q", c, id, e.TaskID)
		}
		out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Data))
		return true
	}); err != nil {
		t.Fatalf("Events(%q, %q, %d): %v", c, id, after, err)
	}
	return strings.Join(out, " ")
}

// turns returns the conversation's turns joined by spaces.
func turns(t *testing.T, s taskstore.Store, c, ctx string) string {
	t.Helper()
	items, err := s.Turns(c, ctx)
	if err != nil {
		t.Fatalf("Turns(%q, %q): %v", c, ctx, err)
	}
	var out []string
	for _, it := range items {
		out = append(out, string(it))
	}
	return strings.Join(out, " ")
}

// pushes returns the task's configs as "id:delivered:data" words, in the order given.
func pushes(t *testing.T, s taskstore.Store, c, id string) string {
	t.Helper()
	ps, err := s.Pushes(c, id)
	if err != nil {
		t.Fatalf("Pushes(%q, %q): %v", c, id, err)
	}
	var out []string
	for _, p := range ps {
		if p.TaskID != id {
			t.Errorf("Pushes(%q, %q) gave a config of task %q", c, id, p.TaskID)
		}
		out = append(out, fmt.Sprintf("%s:%d:%s", p.ID, p.Delivered, p.Data))
	}
	return strings.Join(out, " ")
}

func testTasks(t *testing.T, h *harness) {
	s := h.s
	a := task("a", time.Hour)
	must(t, "PutTask a", s.PutTask(a))
	if got, ok := getTask(t, s, capsule, "a"); !ok || !sameTask(got, a) {
		t.Errorf("Task after PutTask: %+v (found %v), want %+v", got, ok, a)
	}
	if _, ok := getTask(t, s, capsule, "missing"); ok {
		t.Error("Task of an id never stored: found")
	}
	if _, ok := getTask(t, s, "other", "a"); ok {
		t.Error("Task of another capsule's id: found; capsules must not share tasks")
	}
	a.Data, a.State, a.Done, a.Updated = []byte(`{"v":2}`), "completed", true, t0
	must(t, "PutTask a again", s.PutTask(a))
	if got, _ := getTask(t, s, capsule, "a"); !sameTask(got, a) {
		t.Errorf("Task after a replacing PutTask: %+v, want %+v", got, a)
	}
	if got := ids(heads(t, s, capsule)); got != "a" {
		t.Errorf("heads after replacing a task: %q, want one, a", got)
	}
	must(t, "DeleteTask a", s.DeleteTask(capsule, "a"))
	if _, ok := getTask(t, s, capsule, "a"); ok {
		t.Error("Task after DeleteTask: found")
	}
	must(t, "DeleteTask of an absent task", s.DeleteTask(capsule, "a"))
}

func testIndex(t *testing.T, h *harness) {
	s := h.s
	var want []taskstore.Task
	for i := range 3 {
		tk := task(fmt.Sprint(i), time.Duration(i)*time.Hour)
		tk.Done, tk.State = i == 1, []string{"working", "completed", "input-required"}[i]
		want = append(want, tk)
		must(t, "PutTask", s.PutTask(tk))
	}
	other := task("x", 0)
	other.Capsule = "other"
	must(t, "PutTask of another capsule", s.PutTask(other))
	got := heads(t, s, capsule)
	if ids(got) != "0 1 2" {
		t.Fatalf("Heads: ids %q, want 0 1 2 (and not the other capsule's x)", ids(got))
	}
	for _, tk := range want {
		if !sameHead(got[tk.ID], taskstore.HeadOf(tk)) {
			t.Errorf("head of %s: %+v, want %+v", tk.ID, got[tk.ID], taskstore.HeadOf(tk))
		}
	}
	n := 0
	if err := s.Heads(capsule, func(taskstore.Head) bool { n++; return false }); err != nil || n != 1 {
		t.Errorf("Heads stopped by fn after the first: called %d times (%v), want 1", n, err)
	}
	if got := heads(t, s, "nobody"); len(got) != 0 {
		t.Errorf("Heads of a capsule with no tasks: %v", ids(got))
	}
}

func testOwners(t *testing.T, h *harness) {
	s := h.s
	for id, owner := range map[string]string{"anon": "", "a": "alice", "b": "bob"} {
		tk := task(id, 0)
		tk.Owner = owner
		must(t, "PutTask", s.PutTask(tk))
	}
	hs := heads(t, s, capsule)
	for id, owner := range map[string]string{"anon": "", "a": "alice", "b": "bob"} {
		if got, _ := getTask(t, s, capsule, id); got.Owner != owner {
			t.Errorf("Task %s: owner %q, want %q", id, got.Owner, owner)
		}
		if hs[id].Owner != owner {
			t.Errorf("head %s: owner %q, want %q", id, hs[id].Owner, owner)
		}
	}
	tk := task("a", 0)
	tk.Owner = "carol"
	must(t, "PutTask with a new owner", s.PutTask(tk))
	if got, _ := getTask(t, s, capsule, "a"); got.Owner != "carol" || heads(t, s, capsule)["a"].Owner != "carol" {
		t.Errorf("after a replacing PutTask, the owner is %q in the record and %q in the index, want carol in both",
			got.Owner, heads(t, s, capsule)["a"].Owner)
	}
}

func testJournal(t *testing.T, h *harness) {
	s := h.s
	must(t, "PutTask", s.PutTask(task("a", 0)))
	ev := func(id string, seq uint64, data string) taskstore.Event {
		return taskstore.Event{TaskID: id, Seq: seq, Data: []byte(data)}
	}
	must(t, "Append 1-2", s.Append(capsule, ev("a", 1, "one"), ev("a", 2, "two")))
	must(t, "Append 3", s.Append(capsule, ev("a", 3, "three")))
	must(t, "Append of another task", s.Append(capsule, ev("b", 1, "b-one")))
	must(t, "Append of another capsule", s.Append("other", ev("a", 1, "other-one")))
	must(t, "Append 4-5", s.Append(capsule, ev("a", 5, "five"), ev("a", 4, "four")))
	for _, c := range []struct {
		after uint64
		want  string
	}{
		{0, "1:one 2:two 3:three 4:four 5:five"},
		{3, "4:four 5:five"},
		{5, ""},
	} {
		if got := events(t, s, capsule, "a", c.after); got != c.want {
			t.Errorf("Events after %d: %q, want %q", c.after, got, c.want)
		}
	}
	n := 0
	if err := s.Events(capsule, "a", 0, func(taskstore.Event) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Errorf("Events stopped by fn at the second: called %d times (%v), want 2", n, err)
	}
	must(t, "Append replacing seq 2", s.Append(capsule, ev("a", 2, "TWO")))
	if got := events(t, s, capsule, "a", 1); got != "2:TWO 3:three 4:four 5:five" {
		t.Errorf("Events after an Append with a stored seq: %q, want seq 2 replaced", got)
	}
	if got := events(t, s, "other", "a", 0); got != "1:other-one" {
		t.Errorf("another capsule's journal of the same task id: %q", got)
	}
	must(t, "DeleteTask", s.DeleteTask(capsule, "a"))
	if got := events(t, s, capsule, "a", 0); got != "" {
		t.Errorf("Events after DeleteTask: %q, want none", got)
	}
	if got := events(t, s, capsule, "b", 0); got != "1:b-one" {
		t.Errorf("another task's journal after DeleteTask: %q", got)
	}
}

func testTurns(t *testing.T, h *harness) {
	s := h.s
	for _, it := range []string{"one", "two", "three"} {
		must(t, "AddTurn", s.AddTurn(capsule, "ctx", []byte(it)))
	}
	must(t, "AddTurn of another context", s.AddTurn(capsule, "ctx2", []byte("x")))
	must(t, "AddTurn of another capsule", s.AddTurn("other", "ctx", []byte("y")))
	if got := turns(t, s, capsule, "ctx"); got != "one two three" {
		t.Errorf("Turns: %q, want one two three, oldest first", got)
	}
	if got := turns(t, s, capsule, "nothing"); got != "" {
		t.Errorf("Turns of an unknown context: %q", got)
	}
	if got := turns(t, s, "other", "ctx"); got != "y" {
		t.Errorf("another capsule's turns of the same context: %q", got)
	}
	for i := range 100 {
		must(t, "AddTurn", s.AddTurn(capsule, "long", []byte(fmt.Sprint(i))))
	}
	if items, err := s.Turns(capsule, "long"); err != nil || len(items) != 100 || string(items[0]) != "0" {
		t.Errorf("Turns of a 100-turn conversation: %d turns (%v), want all 100 from the first", len(items), err)
	}
}

// testBlobs: a blob reads back as written, is replaced by id, survives a restart, and
// goes with its task, deleted or evicted.
func testBlobs(t *testing.T, h *harness) {
	s := h.s
	big := bytes.Repeat([]byte("blob"), 1<<18) // 1 MiB
	must(t, "PutTask a", s.PutTask(task("a", 0)))
	must(t, "PutTask b", s.PutTask(task("b", 0)))
	must(t, "PutBlob a/x", s.PutBlob(capsule, "a", "x", big))
	must(t, "PutBlob a/y", s.PutBlob(capsule, "a", "y", []byte("first")))
	must(t, "PutBlob a/y again", s.PutBlob(capsule, "a", "y", []byte("second")))
	must(t, "PutBlob b/x", s.PutBlob(capsule, "b", "x", []byte("b's")))
	check := func(when, taskID, id string, want []byte) {
		t.Helper()
		got, found, err := s.Blob(capsule, taskID, id)
		if err != nil || found != (want != nil) || !bytes.Equal(got, want) {
			t.Errorf("%s: Blob(%s, %s) = %d bytes, found %v, %v; want %d bytes", when, taskID, id, len(got), found, err, len(want))
		}
	}
	check("written", "a", "x", big)
	check("replaced", "a", "y", []byte("second"))
	check("another task's", "b", "x", []byte("b's"))
	check("never written", "a", "z", nil)
	h.restart()
	s = h.s
	check("after a restart", "a", "x", big)
	must(t, "DeleteTask a", s.DeleteTask(capsule, "a"))
	check("after DeleteTask", "a", "x", nil)
	check("another task's, after DeleteTask a", "b", "x", []byte("b's"))
	if n, err := s.Evict(capsule, t0.Add(time.Hour), 0, nil); err != nil || n != 1 {
		t.Fatalf("Evict: %d, %v", n, err)
	}
	check("after Evict", "b", "x", nil)
	if _, _, err := s.Blob(capsule, "a", ""); err == nil {
		t.Error("Blob with an empty id: no error")
	}
}

func testPush(t *testing.T, h *harness) {
	s := h.s
	p := func(task, id string, delivered uint64) taskstore.Push {
		return taskstore.Push{TaskID: task, ID: id, Data: []byte("cfg-" + id), Delivered: delivered}
	}
	// A config for a task the store does not hold is refused, and the writes queued
	// beside it are not.
	before, refused, after := s.PutTask(task("a", 0)), s.PutPush(capsule, p("missing", "x", 0)), s.PutTask(task("b", 0))
	must(t, "PutTask before a refused PutPush", before)
	wantCode(t, "PutPush for a task the store does not hold", result(t, "PutPush", refused), taskstore.CodeNoTask)
	must(t, "PutTask after a refused PutPush", after)
	if got := pushes(t, s, capsule, "missing"); got != "" {
		t.Errorf("a refused PutPush wrote %q", got)
	}
	must(t, "PutPush b", s.PutPush(capsule, p("a", "b", 0)))
	must(t, "PutPush a", s.PutPush(capsule, p("a", "a", 2)))
	must(t, "PutPush of task b", s.PutPush(capsule, p("b", "c", 0)))
	if got := pushes(t, s, capsule, "a"); got != "a:2:cfg-a b:0:cfg-b" {
		t.Errorf("Pushes: %q, want a then b (id order)", got)
	}
	must(t, "SetDelivered 5", s.SetDelivered(capsule, "a", "a", 5))
	must(t, "SetDelivered 3", s.SetDelivered(capsule, "a", "a", 3))
	must(t, "SetDelivered of an absent config", s.SetDelivered(capsule, "a", "gone", 9))
	if got := pushes(t, s, capsule, "a"); got != "a:5:cfg-a b:0:cfg-b" {
		t.Errorf("after SetDelivered 5 then 3: %q, want a's cursor at 5 (never lowered)", got)
	}
	replaced := p("a", "b", 1)
	replaced.Data = []byte("new")
	must(t, "PutPush replacing b", s.PutPush(capsule, replaced))
	must(t, "DeletePush a", s.DeletePush(capsule, "a", "a"))
	must(t, "DeletePush of an absent config", s.DeletePush(capsule, "a", "a"))
	if got := pushes(t, s, capsule, "a"); got != "b:1:new" {
		t.Errorf("after replacing b and deleting a: %q, want b:1:new", got)
	}
	var all []string
	if err := s.AllPushes(capsule, func(p taskstore.Push) bool { all = append(all, p.TaskID+"/"+p.ID); return true }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	if fmt.Sprint(all) != "[a/b b/c]" {
		t.Errorf("AllPushes: %v, want [a/b b/c]", all)
	}
	must(t, "DeleteTask a", s.DeleteTask(capsule, "a"))
	if got := pushes(t, s, capsule, "a"); got != "" {
		t.Errorf("Pushes after DeleteTask: %q, want none: a config never outlives its task", got)
	}
	wantCode(t, "PutPush for a deleted task", result(t, "PutPush", s.PutPush(capsule, p("a", "z", 0))), taskstore.CodeNoTask)
}

func testRetention(t *testing.T, h *harness) {
	s := h.s
	// Tasks 1..5 updated 1..5 hours before t0; 4 and 5 share a conversation with 1.
	for i := 1; i <= 5; i++ {
		tk := task(fmt.Sprint(i), time.Duration(i)*time.Hour)
		if i >= 4 {
			tk.ContextID = "ctx-1"
		}
		must(t, "PutTask", s.PutTask(tk))
		must(t, "Append", s.Append(capsule, taskstore.Event{TaskID: tk.ID, Seq: 1, Data: []byte("e")}))
		must(t, "PutPush", s.PutPush(capsule, taskstore.Push{TaskID: tk.ID, ID: "p", Data: []byte("c")}))
		must(t, "AddTurn", s.AddTurn(capsule, tk.ContextID, []byte("turn-"+tk.ID)))
	}
	other := task("9", 99*time.Hour)
	other.Capsule = "other"
	must(t, "PutTask of another capsule", s.PutTask(other))

	// Older than 3.5 h: 4 and 5 go; their conversation stays, task 1 is in it.
	n, err := s.Evict(capsule, t0.Add(-210*time.Minute), 0, nil)
	if err != nil || n != 2 || ids(heads(t, s, capsule)) != "1 2 3" {
		t.Fatalf("Evict older than 3.5 h: removed %d (%v), left %q, want 2 removed, 1 2 3 left", n, err, ids(heads(t, s, capsule)))
	}
	for _, id := range []string{"4", "5"} {
		if _, ok := getTask(t, s, capsule, id); ok || events(t, s, capsule, id, 0) != "" || pushes(t, s, capsule, id) != "" {
			t.Errorf("evicted task %s: its record, journal or push configs are left", id)
		}
	}
	if got := turns(t, s, capsule, "ctx-1"); got != "turn-1 turn-4 turn-5" {
		t.Errorf("turns of a conversation a remaining task belongs to: %q, want all three kept", got)
	}
	// At most one, sparing 3 (the oldest left): 2 goes, with its conversation; 1 stays.
	keep := func(id string) bool { return id == "3" }
	n, err = s.Evict(capsule, time.Time{}, 1, keep)
	if err != nil || n != 1 || ids(heads(t, s, capsule)) != "1 3" {
		t.Fatalf("Evict to 1 sparing 3: removed %d (%v), left %q, want 1 removed, 1 3 left", n, err, ids(heads(t, s, capsule)))
	}
	if got := turns(t, s, capsule, "ctx-2"); got != "" {
		t.Errorf("turns of a conversation no remaining task belongs to: %q, want none", got)
	}
	if got := turns(t, s, capsule, "ctx-3"); got != "turn-3" {
		t.Errorf("turns of a spared task's conversation: %q, want kept", got)
	}
	if n, err := s.Evict(capsule, t0.Add(-5*time.Hour), 0, nil); err != nil || n != 0 {
		t.Errorf("Evict with nothing due: removed %d (%v), want 0", n, err)
	}
	if got := ids(heads(t, s, "other")); got != "9" {
		t.Errorf("another capsule's tasks after evictions: %q, want 9 untouched", got)
	}
}

func testRestart(t *testing.T, h *harness) {
	a := task("a", time.Hour)
	a.Owner, a.Done, a.State = "alice", true, "completed"
	must(t, "PutTask", h.s.PutTask(a))
	must(t, "Append", h.s.Append(capsule, taskstore.Event{TaskID: "a", Seq: 1, Data: []byte("one")},
		taskstore.Event{TaskID: "a", Seq: 2, Data: []byte("two")}))
	must(t, "AddTurn", h.s.AddTurn(capsule, "ctx-a", []byte("turn")))
	must(t, "PutPush", h.s.PutPush(capsule, taskstore.Push{TaskID: "a", ID: "p", Data: []byte("cfg")}))
	// Not waited for: Close commits what was queued.
	last := h.s.SetDelivered(capsule, "a", "p", 2)
	h.close()
	if err := result(t, "SetDelivered queued before Close", last); err != nil {
		t.Fatalf("a write queued before Close: %v", err)
	}
	h.open()
	s := h.s
	if got, ok := getTask(t, s, capsule, "a"); !ok || !sameTask(got, a) {
		t.Errorf("Task after a restart: %+v (found %v), want %+v", got, ok, a)
	}
	if got := heads(t, s, capsule); !sameHead(got["a"], taskstore.HeadOf(a)) {
		t.Errorf("head after a restart: %+v, want %+v", got["a"], taskstore.HeadOf(a))
	}
	if got := events(t, s, capsule, "a", 0); got != "1:one 2:two" {
		t.Errorf("journal after a restart: %q", got)
	}
	if got := turns(t, s, capsule, "ctx-a"); got != "turn" {
		t.Errorf("turns after a restart: %q", got)
	}
	if got := pushes(t, s, capsule, "a"); got != "p:2:cfg" {
		t.Errorf("push configs after a restart: %q, want p with its cursor at 2", got)
	}
	must(t, "PutTask after a restart", s.PutTask(task("b", 0)))
	h.restart()
	if got := ids(heads(t, h.s, capsule)); got != "a b" {
		t.Errorf("tasks after a second restart: %q, want a b", got)
	}
}

func testCorrupt(t *testing.T, h *harness) {
	must(t, "PutTask", h.s.PutTask(task("a", 0)))
	must(t, "Append", h.s.Append(capsule, taskstore.Event{TaskID: "a", Seq: 1, Data: []byte("one")}))
	h.close()
	h.b.Damage(t, h.place)
	s, err := h.b.Open(h.place)
	if err == nil {
		_ = h.b.Close(s)
		t.Fatal("Open of a damaged store succeeded; it must be refused before anything is read from it")
	}
	wantCode(t, "Open of a damaged store", err, taskstore.CodeNotAStore)
}

func testIDs(t *testing.T, h *harness) {
	s := h.s
	long := strings.Repeat("x", taskstore.MaxIDLen+1)
	must(t, "PutTask with ids of the longest length", s.PutTask(taskstore.Task{Capsule: capsule, ID: long[1:], ContextID: long[1:], Owner: long[1:]}))
	write := func(ch <-chan error) func() error { return func() error { return result(t, "write", ch) } }
	read := func(err error) func() error { return func() error { return err } }
	_, _, taskErr := s.Task(capsule, "")
	_, turnsErr := s.Turns(capsule, long)
	_, pushesErr := s.Pushes("", "a")
	for name, call := range map[string]func() error{
		"PutTask no id":           write(s.PutTask(taskstore.Task{Capsule: capsule})),
		"PutTask no capsule":      write(s.PutTask(taskstore.Task{ID: "a"})),
		"PutTask long context":    write(s.PutTask(taskstore.Task{Capsule: capsule, ID: "a", ContextID: long})),
		"PutTask long owner":      write(s.PutTask(taskstore.Task{Capsule: capsule, ID: "a", Owner: long})),
		"PutTask long state":      write(s.PutTask(taskstore.Task{Capsule: capsule, ID: "a", State: long})),
		"PutTask NUL in id":       write(s.PutTask(taskstore.Task{Capsule: capsule, ID: "a\x00b"})),
		"AddTurn invalid UTF-8":   write(s.AddTurn(capsule, "ctx\xff", []byte("x"))),
		"Append no task id":       write(s.Append(capsule, taskstore.Event{Seq: 1})),
		"AddTurn no context":      write(s.AddTurn(capsule, "", []byte("x"))),
		"DeleteTask long id":      write(s.DeleteTask(capsule, long)),
		"PutPush no config id":    write(s.PutPush(capsule, taskstore.Push{TaskID: "a"})),
		"SetDelivered no task id": write(s.SetDelivered(capsule, "", "p", 1)),
		"DeletePush long id":      write(s.DeletePush(capsule, "a", long)),
		"Task no id":              read(taskErr),
		"Heads no capsule":        read(s.Heads("", func(taskstore.Head) bool { return true })),
		"Events long task id":     read(s.Events(capsule, long, 0, func(taskstore.Event) bool { return true })),
		"Turns long context":      read(turnsErr),
		"Pushes no capsule":       read(pushesErr),
		"AllPushes no capsule":    read(s.AllPushes("", func(taskstore.Push) bool { return true })),
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, name, call(), taskstore.CodeBadID) })
	}
	if got := ids(heads(t, s, capsule)); got != long[1:] {
		t.Errorf("after refused writes the store holds %d tasks, want only the one stored", len(heads(t, s, capsule)))
	}
}

func testConcurrent(t *testing.T, h *harness) {
	s := h.s
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				put, app := s.PutTask(task(id, 0)), s.Append(capsule, taskstore.Event{TaskID: id, Seq: 1, Data: []byte(id)})
				for _, ch := range []<-chan error{put, app} {
					if err := result(t, "concurrent write", ch); err != nil {
						errc <- err
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("a concurrent write failed: %v", err)
	}
	if got := len(heads(t, s, capsule)); got != writers*each {
		t.Errorf("after %d concurrent writers of %d tasks each: %d tasks, want %d", writers, each, got, writers*each)
	}
	if got := events(t, s, capsule, "w3-7", 0); got != "1:w3-7" {
		t.Errorf("journal of one concurrently written task: %q", got)
	}
}

func testClosed(t *testing.T, h *harness) {
	s := h.s
	h.close()
	wantCode(t, "PutTask after Close", result(t, "PutTask", s.PutTask(task("a", 0))), taskstore.CodeClosed)
	wantCode(t, "Append after Close", result(t, "Append", s.Append(capsule, taskstore.Event{TaskID: "a", Seq: 1})), taskstore.CodeClosed)
	h.open()
	if _, ok := getTask(t, h.s, capsule, "a"); ok {
		t.Error("a write refused after Close was kept")
	}
}
