package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.CloseShared()
	os.Exit(code)
}

// replica is one gateway of a fleet in a test: its store, handler and server.
type replica struct {
	name string
	db   *pgstore.Store
	h    *Handler
	srv  *httptest.Server
}

// fleetOf2 starts two replicas on one fresh database, each running exec with cfg's
// lifecycle; exec learns which replica runs a job from its name.
func newFleet(t *testing.T, n int, cfg Config, exec func(replica string) Executor) []*replica {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	var out []*replica
	for i := range n {
		name := fmt.Sprintf("gw%d", i+1)
		db, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Instance: name, Lease: 3 * time.Second, PushKey: strings.Repeat("k", pgstore.MinKeyLen)})
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Store, c.Executor = db, exec(name)
		h, srv := newServer(t, c)
		t.Cleanup(func() { _ = db.Close() }) // after the server's cleanup: cleanups run last first
		out = append(out, &replica{name: name, db: db, h: h, srv: srv})
	}
	return out
}

// TestFleetAnyReplica sends a task through one replica and reads, streams and resumes it
// through the other, whichever runs it; a cancel through the one not running a task stops
// it where it runs.
func TestFleetAnyReplica(t *testing.T) {
	pgtest.Need(t)
	type run struct {
		job     *Job
		replica string
	}
	started := make(chan run, 8)
	release := make(chan string)
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 1}}, func(name string) Executor {
		return execFunc(func(ctx context.Context, job *Job) Outcome {
			started <- run{job, name}
			select {
			case ans := <-release:
				job.Chunk(ans)
				return Outcome{State: "completed", Text: ans}
			case <-ctx.Done():
				return Outcome{State: "failed", Text: ctx.Err().Error()}
			}
		})
	})
	byName := map[string]*replica{fl[0].name: fl[0], fl[1].name: fl[1]}
	other := func(name string) *replica {
		if name == fl[0].name {
			return fl[1]
		}
		return fl[0]
	}
	for _, via := range fl {
		task := decode[tObj](t, ok(t, call(t, via.srv, "", "message/send", map[string]any{"message": msg03("hi"), "configuration": map[string]any{"blocking": false}})))
		r := recv(t, started)
		if r.job.TaskID != task.ID {
			t.Fatalf("ran %s, sent %s", r.job.TaskID, task.ID)
		}
		runner, reader := byName[r.replica], other(r.replica)
		got := waitState(t, reader.srv, task.ID, "working")
		if got.ID != task.ID {
			t.Fatalf("read %+v", got)
		}
		// A stream opened on the replica not running the task, resumed after event 1 on
		// the one running it: both get the rest, in order, once.
		live := stream(t, reader.srv, "", "tasks/resubscribe", map[string]any{"id": task.ID})
		first := next(t, live)
		if first.Data.Result == nil {
			t.Fatalf("first event %+v", first)
		}
		release <- "done " + r.replica
		events := append([]sseEvent{first}, drain(t, live)...)
		checkIDs(t, events)
		final := decode[tObj](t, ok(t, call(t, reader.srv, "", "tasks/get", map[string]any{"id": task.ID})))
		if final.Status.State != "completed" {
			t.Fatalf("read through %s: %s", reader.name, final.Status.State)
		}
		// Every binding and version reads it through the replica that did not run it.
		if got := restCall[tObj](t, reader.srv, "GET", "v1/tasks/"+task.ID, nil, ""); got.Status.State != "completed" && got.Status.State != "TASK_STATE_COMPLETED" {
			t.Errorf("HTTP+JSON v1/tasks through %s: %+v", reader.name, got)
		}
		for _, got := range []map[string]any{
			restCall[map[string]any](t, reader.srv, "GET", "tasks/"+task.ID, v1, ""),
			decode[map[string]any](t, ok(t, call(t, reader.srv, "1.0", "GetTask", map[string]any{"id": task.ID}))),
		} {
			if st, _ := got["status"].(map[string]any); st["state"] != "TASK_STATE_COMPLETED" {
				t.Errorf("1.0 through %s: %v", reader.name, got)
			}
		}
		resumed := streamWith(t, reader.srv, "", "tasks/resubscribe", map[string]any{"id": task.ID}, map[string]string{"Last-Event-ID": "1"})
		rest := drain(t, resumed)
		if len(rest) == 0 || rest[0].ID != 2 {
			t.Fatalf("resumed after 1 through %s: %+v", reader.name, rest)
		}
		checkIDs(t, rest)
		_ = runner
	}

	// Cancel through the replica not running the task.
	task := decode[tObj](t, ok(t, call(t, fl[0].srv, "", "message/send", map[string]any{"message": msg03("long"), "configuration": map[string]any{"blocking": false}})))
	r := recv(t, started)
	reader := other(r.replica)
	canceled := decode[tObj](t, ok(t, call(t, reader.srv, "", "tasks/cancel", map[string]any{"id": task.ID})))
	if canceled.Status.State != "canceled" {
		t.Fatalf("cancel through %s: %s", reader.name, canceled.Status.State)
	}
	for _, rep := range fl {
		if got := decode[tObj](t, ok(t, call(t, rep.srv, "", "tasks/get", map[string]any{"id": task.ID}))); got.Status.State != "canceled" {
			t.Fatalf("read through %s: %s", rep.name, got.Status.State)
		}
	}
	// The list through either replica holds every task once.
	for _, rep := range fl {
		res := decode[struct{ Tasks []tObj }](t, ok(t, call(t, rep.srv, "1.0", "ListTasks", map[string]any{})))
		if len(res.Tasks) != 3 {
			t.Fatalf("list through %s: %d tasks", rep.name, len(res.Tasks))
		}
	}
}

// TestFleetContextOrder sends many tasks into one context through both replicas at once:
// they run one at a time, in the order admitted, across the replicas; other contexts run
// beside them.
func TestFleetContextOrder(t *testing.T) {
	pgtest.Need(t)
	var mu sync.Mutex
	var runs []string
	running := map[string]bool{}
	overlap := ""
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 2, Acceptance: AcceptQueue, QueueDepth: 100}}, func(name string) Executor {
		return execFunc(func(ctx context.Context, job *Job) Outcome {
			mu.Lock()
			if running[job.ContextID] {
				overlap = job.TaskID
			}
			running[job.ContextID] = true
			if job.ContextID == "ctx_one" {
				runs = append(runs, job.Text)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond) // work, so that overlaps would show
			mu.Lock()
			running[job.ContextID] = false
			mu.Unlock()
			return Outcome{State: "completed", Text: name}
		})
	})
	const n = 20
	var sent []string
	var ids []string
	for i := range n {
		via := fl[i%2]
		text := fmt.Sprint(i)
		task := decode[tObj](t, ok(t, call(t, via.srv, "", "message/send", map[string]any{"message": msg03(text, oneCtx), "configuration": map[string]any{"blocking": false}})))
		sent, ids = append(sent, text), append(ids, task.ID)
		// Another context beside it.
		_ = decode[tObj](t, ok(t, call(t, via.srv, "", "message/send", map[string]any{"message": msg03("x"), "configuration": map[string]any{"blocking": false}})))
	}
	for _, id := range ids {
		waitState(t, fl[0].srv, id, "completed")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap != "" {
		t.Fatalf("task %s ran beside another of its context", overlap)
	}
	if fmt.Sprint(runs) != fmt.Sprint(sent) {
		t.Fatalf("ran %v, sent %v", runs, sent)
	}
}

// TestFleetInputAnswer answers a task waiting for input on one replica through the other.
func TestFleetInputAnswer(t *testing.T) {
	pgtest.Need(t)
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 1}}, func(string) Executor { return &inputExec{errs: make(chan error, 4)} })
	task := decode[tObj](t, ok(t, call(t, fl[0].srv, "", "message/send", map[string]any{"message": msg03("hi"), "configuration": map[string]any{"blocking": false}})))
	waitState(t, fl[0].srv, task.ID, "input-required")
	runner, err := fl[0].db.Runner("hello", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	other := fl[0]
	if runner == fl[0].name {
		other = fl[1]
	}
	got := decode[tObj](t, ok(t, call(t, other.srv, "", "message/send", map[string]any{"message": msg03("Ada", "taskId="+task.ID)})))
	if got.Status.State != "completed" {
		t.Fatalf("answered through %s: %s", other.name, got.Status.State)
	}
	raw, _ := json.Marshal(got.Artifacts)
	if want := "hello, Ada"; !strings.Contains(string(raw), want) {
		t.Fatalf("artifacts %s, want %q", raw, want)
	}
}

var _ taskstore.Fleet = (*pgstore.Store)(nil)

// TestFleetPushAcrossReplicas: a task with a push config runs on the replica it was sent
// to and is answered through the other; its webhook hears every state once, in order,
// from the replica running it.
func TestFleetPushAcrossReplicas(t *testing.T) {
	pgtest.Need(t)
	rc := newReceiver(t, nil)
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 1}, Push: &PushPolicy{Allow: rules(t, rc.srv.URL)}},
		func(string) Executor { return &inputExec{errs: make(chan error, 4)} })
	task := sendWithPush(t, fl[0].srv, "0.3", "hi", rc.srv.URL+"/hook")
	if task.Status.State != "input-required" {
		t.Fatalf("state %s", task.Status.State)
	}
	ok(t, call(t, fl[1].srv, "", "message/send", map[string]any{"message": msg03("ada", "taskId="+task.ID)}))
	for i, want := range []string{"submitted", "working", "input-required", "working", "working+hello, ada", "completed+hello, ada"} {
		if got := hookState(t, "0.3", recv(t, rc.got)); got != want {
			t.Fatalf("notification %d: %s, want %s", i, got, want)
		}
	}
	select {
	case h := <-rc.got:
		t.Fatalf("a notification more: %s", h.body)
	case <-time.After(200 * time.Millisecond): // a second worker would have sent its first by now
	}
}

// TestFleetHandBack: a replica stopping cleanly hands the tasks it holds without having
// started them back to the store, and another replica runs them; the one it ran ends
// interrupted, naming it.
func TestFleetHandBack(t *testing.T) {
	pgtest.Need(t)
	started := make(chan string, 8)
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 1}}, func(name string) Executor {
		return execFunc(func(ctx context.Context, job *Job) Outcome {
			started <- name + " " + job.Text
			if job.Text == "hold" {
				<-ctx.Done()
				return Outcome{State: "failed", Text: "stopped"}
			}
			return Outcome{State: "completed", Text: name}
		})
	})
	async := map[string]any{"blocking": false}
	held := decode[tObj](t, ok(t, call(t, fl[0].srv, "", "message/send", map[string]any{"message": msg03("hold"), "configuration": async})))
	if got := recv(t, started); got != "gw1 hold" {
		t.Fatalf("started %s", got)
	}
	var waiting []tObj
	for _, text := range []string{"a", "b"} {
		waiting = append(waiting, decode[tObj](t, ok(t, call(t, fl[0].srv, "", "message/send", map[string]any{"message": msg03(text), "configuration": async}))))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = fl[0].h.Shutdown(ctx)
	for _, w := range waiting {
		got := waitState(t, fl[1].srv, w.ID, "completed")
		if text := got.Artifacts[0].Parts[0].Text; text != "gw2" {
			t.Errorf("task %s ran on %s, want gw2", w.ID, text)
		}
	}
	got := waitState(t, fl[1].srv, held.ID, "failed") // written as gw1's grace period ended
	if got.Status.State != "failed" || got.Status.Message == nil || !strings.Contains(text(got.Status.Message.Parts), "interrupted: gateway gw1 stopped while this task ran") {
		t.Fatalf("the held task: %+v", got.Status)
	}
}
