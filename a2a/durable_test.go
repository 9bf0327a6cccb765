package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"

	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

// TestDurableTurnRecords: each version of a stored threaded turn is read back — a record
// of a release before threads (no V) as its text, one of a later release as its text
// too — and a turn written now keeps its Thread, a compacted one (version 3) included,
// and is written at the version that says what it holds.
func TestDurableTurnRecords(t *testing.T) {
	thread := Thread{Messages: json.RawMessage(`[{"role":"user"}]`), Continuation: "c1", ContinuationBy: "d"}
	compacted := Thread{Messages: json.RawMessage(`[{"role":"user","content":[{"type":"text","text":"Summary"}]}]`), Continuation: "c2", ContinuationBy: "d", Compacted: true}
	tests := []struct {
		name   string
		stored string // "" writes Turn{User: "u", Agent: "a", Thread: write} through the store
		write  Thread
		wantV  int // the version written, when written through the store
		want   Turn
	}{
		{name: "version 1, text only", stored: `{"User":"u","Agent":"a"}`, want: Turn{User: "u", Agent: "a"}},
		{name: "version 2", write: thread, wantV: 2, want: Turn{User: "u", Agent: "a", Thread: thread}},
		{name: "version 3, compacted", write: compacted, wantV: 3, want: Turn{User: "u", Agent: "a", Thread: compacted}},
		{name: "a later version keeps its text", stored: `{"V":4,"User":"u","Agent":"a","Messages":[1],"Continuation":"c9"}`, want: Turn{User: "u", Agent: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			exec := newDurableExec()
			t.Cleanup(func() { close(exec.release) })
			g := openGen(t, path, exec)
			if tt.stored == "" {
				g.h.mu.Lock()
				g.h.store.addTurn(contextKey("", "ctx_r"), Turn{User: "u", Agent: "a", Thread: tt.write})
				g.h.mu.Unlock()
			} else if err := <-g.db.AddTurn(testCard().Name, contextKey("", "ctx_r"), []byte(tt.stored)); err != nil {
				t.Fatal(err)
			}
			g.stop()
			if tt.wantV != 0 {
				db, err := taskdb.Open(path, taskdb.Options{})
				if err != nil {
					t.Fatal(err)
				}
				items, err := db.Turns(testCard().Name, contextKey("", "ctx_r"))
				db.Close()
				var rec turnRecord
				if err != nil || len(items) != 1 || json.Unmarshal(items[0], &rec) != nil || rec.V != tt.wantV {
					t.Fatalf("stored %q (%v), want one record of version %d", items, err, tt.wantV)
				}
			}
			g2 := openGen(t, path, exec)
			g2.h.mu.Lock()
			got := g2.h.store.turns(contextKey("", "ctx_r"))
			g2.h.mu.Unlock()
			if !reflect.DeepEqual(got, []Turn{tt.want}) {
				t.Errorf("turns = %+v, want %+v", got, []Turn{tt.want})
			}
		})
	}
}

// durableExec answers "echo: <text>" after one chunk; a task whose text is "hang"
// reports its start and runs until released or canceled. It records every job's
// threaded history, and keeps a Thread of its own with each answer.
type durableExec struct {
	started chan string
	release chan struct{}
	history chan []Turn
}

func newDurableExec() *durableExec {
	return &durableExec{started: make(chan string, 4), release: make(chan struct{}), history: make(chan []Turn, 16)}
}

func (e *durableExec) Execute(ctx context.Context, job *Job) Outcome {
	e.history <- job.History
	if job.Text == "hang" {
		e.started <- job.TaskID
		select {
		case <-e.release:
		case <-ctx.Done():
		}
		return Outcome{State: "failed", Text: "released"}
	}
	job.Chunk("thinking")
	return Outcome{State: "completed", Text: "echo: " + job.Text, Thread: execThread(job.Text)}
}

// execThread is the Thread durableExec keeps of a task with text.
func execThread(text string) Thread {
	m, _ := json.Marshal([]map[string]string{{"said": text}})
	return Thread{Messages: m, Continuation: "c-" + text, ContinuationBy: "durableExec"}
}

// durableGen is one "process": a handler on the task store at path.
type durableGen struct {
	h   *Handler
	srv *httptest.Server
	db  *taskdb.DB
}

func openGen(t *testing.T, path string, exec Executor) *durableGen {
	t.Helper()
	return openGenWith(t, path, Config{Executor: exec})
}

// openGenWith is openGen with more of the handler's config: its card, store and
// lifecycle are set here.
func openGenWith(t *testing.T, path string, cfg Config) *durableGen {
	t.Helper()
	return openGenStore(t, path, cfg, taskdb.Options{})
}

// openGenStore is openGenWith with the task store's options.
func openGenStore(t *testing.T, path string, cfg Config, opts taskdb.Options) *durableGen {
	t.Helper()
	db, err := taskdb.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Card, cfg.Store, cfg.Lifecycle = testCard(), db, Lifecycle{Threaded: true, Concurrency: 4}
	h, err := NewHandler(cfg)
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", h)
	g := &durableGen{h: h, srv: httptest.NewServer(mux), db: db}
	t.Cleanup(g.stop)
	return g
}

// stop is an orderly stop: Shutdown, then the store closed.
func (g *durableGen) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.h.Shutdown(ctx)
	g.srv.Close()
	_ = g.db.Close()
}

// crash closes the store under running tasks, as a killed process leaves it: what was
// committed stays, nothing more is written.
func (g *durableGen) crash() {
	g.srv.Close()
	_ = g.db.Close()
}

// journal returns the task's journal after seq after.
func journal(t *testing.T, db *taskdb.DB, id string, after uint64) []taskstore.Event {
	t.Helper()
	var out []taskstore.Event
	if err := db.Events(testCard().Name, id, after, func(e taskstore.Event) bool { out = append(out, e); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDurableRestart: tasks run on a handler with a store survive a restart — finished
// ones read-only with their artifacts, a running one failed as interrupted, journals
// replayed to a resubscribe with Last-Event-ID, threaded turns handed to the next task.
func TestDurableRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stop  func(*durableGen)
		hangs bool // a task still runs when the process ends
	}{
		{"shutdown", (*durableGen).stop, false},
		{"crash", (*durableGen).crash, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			exec := newDurableExec()
			g := openGen(t, path, exec)
			t.Cleanup(func() { close(exec.release) }) // frees the crashed generation's task

			// A streamed task: every event reaches the client only once it is in the journal.
			var streamed []sseEvent
			for e := range stream(t, g.srv, "", "message/stream", map[string]any{"message": msg03("hi", "contextId=ctx_d")}) {
				id := taskOf(t, "", e).TaskID
				if id == "" {
					id = taskOf(t, "", e).ID
				}
				if j := journal(t, g.db, id, e.ID-1); len(j) == 0 || j[0].Seq != e.ID {
					t.Fatalf("event %d sent before it was durable (journal %v)", e.ID, j)
				}
				streamed = append(streamed, e)
			}
			checkIDs(t, streamed)
			first := taskOf(t, "", streamed[0]).ID
			<-exec.history

			// A blocking send: its answer comes once the completed task is on disk.
			second := decode[tObj](t, ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("again", "contextId=ctx_d")})))
			<-exec.history
			if rec, found, err := g.db.Task(testCard().Name, second.ID); err != nil || !found || !bytes.Contains(rec.Data, []byte(`"completed"`)) {
				t.Fatalf("the answer came before the record was durable: %s %v %v", rec.Data, found, err)
			}

			var hung string
			if tc.hangs {
				ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hang"), "configuration": map[string]any{"blocking": false}}))
				hung = recv(t, exec.started)
				<-exec.history
			}
			tc.stop(g)

			g2 := openGen(t, path, exec)
			for _, v := range []struct{ version, get string }{{"", "tasks/get"}, {"1.0", "GetTask"}} {
				got := decode[tObj](t, ok(t, call(t, g2.srv, v.version, v.get, map[string]any{"id": first})))
				if !terminal(parseState(got.Status.State)) || parseState(got.Status.State) != stateCompleted ||
					len(got.Artifacts) != 1 || text(got.Artifacts[0].Parts) != "echo: hi" || len(got.History) != 1 {
					t.Errorf("%s after restart: %+v", v.get, got)
				}
			}
			if tc.hangs {
				got := decode[tObj](t, ok(t, call(t, g2.srv, "", "tasks/get", map[string]any{"id": hung})))
				if got.Status.State != stateFailed || got.Status.Message == nil || text(got.Status.Message.Parts) != interrupted {
					t.Errorf("the interrupted task: %+v", got)
				}
				j := journal(t, g2.db, hung, 0)
				var last eventRecord
				if err := json.Unmarshal(j[len(j)-1].Data, &last); err != nil || last.Status == nil || last.Status.State != stateFailed {
					t.Errorf("the interrupted task's journal ends with %s", j[len(j)-1].Data)
				}
			}
			list := decode[struct{ Tasks []tObj }](t, ok(t, call(t, g2.srv, "1.0", "ListTasks", map[string]any{})))
			wantTasks := 2
			if tc.hangs {
				wantTasks = 3
			}
			if len(list.Tasks) != wantTasks {
				t.Errorf("ListTasks after restart: %d tasks, want %d", len(list.Tasks), wantTasks)
			}

			// Resubscribing with Last-Event-ID: exactly the events after it, as first sent.
			for _, last := range []uint64{0, 2, streamed[len(streamed)-2].ID} {
				got := drain(t, streamWith(t, g2.srv, "", "tasks/resubscribe", map[string]any{"id": first},
					map[string]string{"Last-Event-ID": fmt.Sprint(last)}))
				want := streamed[last:]
				if len(got) != len(want) {
					t.Fatalf("Last-Event-ID %d: %d events, want %d", last, len(got), len(want))
				}
				for i := range want {
					if got[i].ID != want[i].ID || !bytes.Equal(got[i].Data.Result, want[i].Data.Result) {
						t.Errorf("Last-Event-ID %d, event %d: id %d %s, want id %d %s", last, i, got[i].ID, got[i].Data.Result, want[i].ID, want[i].Data.Result)
					}
				}
			}
			// Past the end of a finished task: its final state alone.
			if got := drain(t, streamWith(t, g2.srv, "", "tasks/resubscribe", map[string]any{"id": first},
				map[string]string{"Last-Event-ID": fmt.Sprint(streamed[len(streamed)-1].ID)})); len(got) != 1 || taskOf(t, "", got[0]).Kind != "task" {
				t.Errorf("resubscribe past the end: %+v", got)
			}

			// The threaded turns survived.
			ok(t, call(t, g2.srv, "", "message/send", map[string]any{"message": msg03("third", "contextId=ctx_d")}))
			want := []Turn{{User: "hi", Agent: "echo: hi", Thread: execThread("hi")},
				{User: "again", Agent: "echo: again", Thread: execThread("again")}}
			if h := recv(t, exec.history); !reflect.DeepEqual(h, want) {
				t.Errorf("history after restart: %+v, want %+v", h, want)
			}
		})
	}
}

// TestDurableInterrupted: records a dead process left behind come back failed when
// they were not finished, unchanged when they were.
func TestDurableInterrupted(t *testing.T) {
	for _, state := range []string{stateSubmitted, stateWorking, stateInputRequired, stateCompleted, stateCanceled} {
		t.Run(state, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			db, err := taskdb.Open(path, taskdb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			snap := snapshot{ID: "tsk_x", ContextID: "ctx_x", Status: status{State: state, Time: now}, Updated: now,
				History: []message{{ID: "m1", Role: "user", Text: "go", TaskID: "tsk_x", ContextID: "ctx_x"}}}
			data, _ := json.Marshal(taskRecord{snapshot: snap, Created: now, Seq: 2})
			if err := <-db.PutTask(taskstore.Task{Capsule: testCard().Name, ID: "tsk_x", ContextID: "ctx_x", Updated: now, Data: data}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			g := openGen(t, path, newDurableExec())
			got := decode[tObj](t, ok(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": "tsk_x"})))
			j := journal(t, g.db, "tsk_x", 0)
			if terminal(state) {
				if got.Status.State != state || len(j) != 0 {
					t.Errorf("a finished task changed: %+v, journal %d events", got, len(j))
				}
				return
			}
			if got.Status.State != stateFailed || got.Status.Message == nil || text(got.Status.Message.Parts) != interrupted {
				t.Fatalf("after restart: %+v", got)
			}
			if len(j) != 1 || j[0].Seq != 3 {
				t.Fatalf("journal: %+v, want the failed status at seq 3", j)
			}
			rec, _, _ := g.db.Task(testCard().Name, "tsk_x")
			var r taskRecord
			if err := json.Unmarshal(rec.Data, &r); err != nil || r.Status.State != stateFailed || r.Seq != 3 {
				t.Errorf("record not written back: %s", rec.Data)
			}
		})
	}
}

// TestDurableAnswerHurries: with a group window far longer than the test, a blocking
// send still answers, and tasks/get right after finds the task completed: the handler
// hurries the commit it waits for instead of waiting out the window.
func TestDurableAnswerHurries(t *testing.T) {
	g := openGenStore(t, filepath.Join(t.TempDir(), "tasks.db"), Config{Executor: newDurableExec()}, taskdb.Options{GroupWindow: time.Hour})
	for range 3 {
		done := decode[tObj](t, ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hi")})))
		if done.Status.State != stateCompleted {
			t.Fatalf("send answered %+v", done.Status)
		}
		rec, found, err := g.db.Task(testCard().Name, done.ID)
		var r taskRecord
		if err != nil || !found || json.Unmarshal(rec.Data, &r) != nil || r.Status.State != stateCompleted {
			t.Fatalf("the answered task is not durable as completed: %s %v %v", rec.Data, found, err)
		}
	}
}

// TestDurableForgottenTask: a finished task the memory store dropped is read back from
// the store.
func TestDurableForgottenTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	g := openGen(t, path, newDurableExec())
	done := decode[tObj](t, ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	g.h.mu.Lock()
	ds := g.h.store.(*durableStore)
	ds.mem = newMemoryStore(keepFinished) // forget everything
	g.h.mu.Unlock()
	got := decode[tObj](t, ok(t, call(t, g.srv, "", "tasks/get", map[string]any{"id": done.ID})))
	if got.Status.State != stateCompleted || len(got.Artifacts) != 1 {
		t.Errorf("forgotten task: %+v", got)
	}
}

// TestDurableListsForgottenTasks: ListTasks lists the finished tasks only the store
// holds (from its index), filtered and paged like those in memory, with their records.
func TestDurableListsForgottenTasks(t *testing.T) {
	g := openGen(t, filepath.Join(t.TempDir(), "tasks.db"), newDurableExec())
	var ids []string // oldest first
	for range 3 {
		done := decode[tObj](t, ok(t, call(t, g.srv, "", "message/send", map[string]any{"message": msg03("hi")})))
		ids = append(ids, done.ID)
	}
	g.h.mu.Lock()
	g.h.store.(*durableStore).mem = newMemoryStore(keepFinished) // forget everything
	g.h.mu.Unlock()
	type page struct {
		Tasks         []tObj
		NextPageToken string
		TotalSize     int
	}
	list := func(params map[string]any) page {
		return decode[page](t, ok(t, call(t, g.srv, "1.0", "ListTasks", params)))
	}
	first := list(map[string]any{"pageSize": 2, "includeArtifacts": true})
	second := list(map[string]any{"pageSize": 2, "pageToken": first.NextPageToken})
	var got []string
	for _, tk := range append(first.Tasks, second.Tasks...) {
		got = append(got, tk.ID)
	}
	if want := []string{ids[2], ids[1], ids[0]}; fmt.Sprint(got) != fmt.Sprint(want) || first.TotalSize != 3 || second.NextPageToken != "" {
		t.Fatalf("pages: %v (total %d, then %q), want %v", got, first.TotalSize, second.NextPageToken, want)
	}
	if a := first.Tasks[0].Artifacts; len(a) != 1 {
		t.Errorf("a listed task from the store: artifacts %+v, want its one", a)
	}
	for _, tc := range []struct {
		params map[string]any
		want   int
	}{
		{map[string]any{"contextId": first.Tasks[1].ContextID}, 1},
		{map[string]any{"status": "TASK_STATE_COMPLETED"}, 3},
		{map[string]any{"status": "TASK_STATE_WORKING"}, 0},
		{map[string]any{"statusTimestampAfter": time.Now().Add(time.Hour).Format(time.RFC3339)}, 0},
	} {
		if p := list(tc.params); p.TotalSize != tc.want || len(p.Tasks) != tc.want {
			t.Errorf("ListTasks %v: %d tasks (total %d), want %d", tc.params, len(p.Tasks), p.TotalSize, tc.want)
		}
	}
}

// TestDurableBeyondTheBuffer: a live task's events that left its buffer are replayed from
// the journal, not replaced by the lagged notice.
func TestDurableBeyondTheBuffer(t *testing.T) {
	e := &chattyExec{n: 20, sent: make(chan struct{}), release: make(chan string)}
	g := openGen(t, filepath.Join(t.TempDir(), "tasks.db"), e)
	g.h.mu.Lock()
	g.h.ringSize = 4
	g.h.mu.Unlock()
	first := stream(t, g.srv, "", "message/stream", map[string]any{"message": msg03("go")})
	<-e.sent
	var seen []sseEvent
	for len(seen) < 22 { // submitted, working, 20 chunks
		seen = append(seen, next(t, first))
	}
	id := taskOf(t, "", seen[0]).ID
	for _, last := range []uint64{1, 10} {
		resumed := streamWith(t, g.srv, "", "tasks/resubscribe", map[string]any{"id": id}, map[string]string{"Last-Event-ID": fmt.Sprint(last)})
		for i := last; i < 22; i++ {
			got := next(t, resumed)
			if got.Name == "lagged" || got.ID != seen[i].ID || !bytes.Equal(got.Data.Result, seen[i].Data.Result) {
				t.Fatalf("Last-Event-ID %d: got id %d %q %s, want id %d %s", last, got.ID, got.Name, got.Data.Result, seen[i].ID, seen[i].Data.Result)
			}
		}
	}
	e.release <- "done"
	drain(t, first)
}

// TestNoEventSkippedAcrossReconnects: over 1,000 events, a client that drops its stream
// every 300 events and resubscribes with Last-Event-ID sees every id exactly once, in
// order, with the bytes the first stream had — past the 512-event buffer, from the journal.
func TestNoEventSkippedAcrossReconnects(t *testing.T) {
	e := &chattyExec{n: 1000, sent: make(chan struct{}), release: make(chan string)}
	g := openGen(t, filepath.Join(t.TempDir(), "tasks.db"), e)
	first := stream(t, g.srv, "", "message/stream", map[string]any{"message": msg03("go")})
	<-e.sent
	const published = 1002 // submitted, working, 1,000 chunks
	var original []sseEvent
	for len(original) < published {
		original = append(original, next(t, first))
	}
	id := taskOf(t, "", original[0]).ID
	// The client keeps the first 300, then reconnects every 300 events.
	got := append([]sseEvent(nil), original[:300]...)
	for len(got) < published {
		last := got[len(got)-1].ID
		s := streamWith(t, g.srv, "", "tasks/resubscribe", map[string]any{"id": id}, map[string]string{"Last-Event-ID": fmt.Sprint(last)})
		for n := 0; n < 300 && len(got) < published; n++ {
			got = append(got, next(t, s))
		}
	}
	e.release <- "done"
	tail := drain(t, streamWith(t, g.srv, "", "tasks/resubscribe", map[string]any{"id": id}, map[string]string{"Last-Event-ID": fmt.Sprint(got[len(got)-1].ID)}))
	got = append(got, tail...)
	want := append(original, drain(t, first)...)
	if len(got) != len(want) {
		t.Fatalf("%d events across reconnects, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != uint64(i+1) || got[i].ID != want[i].ID || got[i].Name == "lagged" || !bytes.Equal(got[i].Data.Result, want[i].Data.Result) {
			t.Fatalf("event %d: id %d %q, want id %d", i, got[i].ID, got[i].Name, want[i].ID)
		}
	}
}

// TestDurableRequeued: a task admitted but never started before a restart runs after it,
// its events numbered on from its journal's.
func TestDurableRequeued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	snap := snapshot{ID: "tsk_q", ContextID: "ctx_q", Status: status{State: stateSubmitted, Time: now}, Updated: now,
		History: []message{{ID: "m1", Role: "user", Text: "go", TaskID: "tsk_q", ContextID: "ctx_q"}}}
	data, _ := json.Marshal(taskRecord{snapshot: snap, Created: now, Seq: 1})
	first := event{seq: 1, kind: evTask, task: &snap}
	for _, ch := range []<-chan error{
		db.PutTask(taskstore.Task{Capsule: testCard().Name, ID: "tsk_q", ContextID: "ctx_q", Updated: now, Data: data}),
		db.Append(testCard().Name, taskstore.Event{TaskID: "tsk_q", Seq: 1, Data: encodeEvent(first)}),
	} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	g := openGen(t, path, newDurableExec())
	got := waitState(t, g.srv, "tsk_q", "completed")
	if len(got.Artifacts) != 1 || text(got.Artifacts[0].Parts) != "echo: go" {
		t.Fatalf("the requeued task: %+v", got)
	}
	j := journal(t, g.db, "tsk_q", 0)
	for i, e := range j {
		if e.Seq != uint64(i+1) {
			t.Fatalf("journal ids %v: not 1, 2, 3 …", j)
		}
	}
	if len(j) < 4 { // task, working, artifact, completed (and a chunk)
		t.Errorf("journal has %d events", len(j))
	}
}

// awayStore is a task store whose storage is away while down is set (taskstore.Health).
type awayStore struct {
	taskstore.Store
	down atomic.Pointer[error]
}

func (s *awayStore) Ready() error {
	if p := s.down.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *awayStore) Ping(context.Context) error { return s.Ready() }

// TestStoreAway: while the store reports its storage away, a send is refused at once with
// the store's error and no task is made; once it is back, sends are served again.
func TestStoreAway(t *testing.T) {
	db, err := taskdb.Open(filepath.Join(t.TempDir(), "tasks.db"), taskdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &awayStore{Store: db}
	h, err := NewHandler(Config{Card: testCard(), Store: store, Executor: newDurableExec()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown(context.Background())
	var away error = errs.New("E-STORE-015", "pgstore", "the task store's database at 127.0.0.1:5432/tasks cannot be reached", "check it")
	store.down.Store(&away)
	r := call(t, srv, "", "message/send", map[string]any{"message": msg03("during")})
	if r.Error == nil || r.Error.Code != codeInternal || !strings.Contains(r.Error.Message, "E-STORE-015") {
		t.Fatalf("a send while the store is away: %+v", r)
	}
	n := 0
	_ = db.Heads(testCard().Name, func(taskstore.Head) bool { n++; return true })
	if n != 0 {
		t.Errorf("the refused send left %d tasks in the store", n)
	}
	store.down.Store(nil)
	if r := call(t, srv, "", "message/send", map[string]any{"message": msg03("after")}); r.Error != nil {
		t.Fatalf("a send once the store is back: %+v", r.Error)
	}
}
