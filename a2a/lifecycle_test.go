package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestInputRequired(t *testing.T) {
	for _, tc := range []struct {
		name, version, method string
		msg                   func(string, ...string) map[string]any
		by                    string // how the answer names the task
	}{
		{"0.3 by task id", "", "message/send", msg03, "taskId"},
		{"0.3 by context id", "", "message/send", msg03, "contextId"},
		{"1.0 by task id", "1.0", "SendMessage", msg10, "taskId"},
		{"1.0 by context id", "1.0", "SendMessage", msg10, "contextId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newServer(t, Config{Executor: &inputExec{errs: make(chan error, 1)}})
			send := func(m map[string]any) tObj {
				res := ok(t, call(t, srv, tc.version, tc.method, map[string]any{"message": m}))
				if tc.version == "1.0" {
					return *decode[tWrap](t, res).Task
				}
				return decode[tObj](t, res)
			}
			asked := send(tc.msg("hi"))
			if state := strings.ToLower(asked.Status.State); !strings.HasSuffix(state, "input-required") && !strings.HasSuffix(state, "input_required") {
				t.Fatalf("first send returned %+v", asked)
			}
			if m := asked.Status.Message; m == nil || text(m.Parts) != "what is your name?" || !strings.HasSuffix(strings.ToLower(m.Role), "agent") {
				t.Fatalf("prompt %+v", asked.Status.Message)
			}
			ref := tc.by + "=" + asked.ID
			if tc.by == "contextId" {
				ref = tc.by + "=" + asked.ContextID
			}
			done := send(tc.msg("Ann", ref))
			if done.ID != asked.ID || !strings.HasSuffix(strings.ToLower(done.Status.State), "completed") {
				t.Fatalf("answer returned %+v", done)
			}
			if len(done.Artifacts) != 1 || text(done.Artifacts[0].Parts) != "hello, Ann" {
				t.Fatalf("artifacts %+v", done.Artifacts)
			}
			var roles []string
			for _, m := range done.History {
				roles = append(roles, strings.TrimPrefix(strings.ToLower(m.Role), "role_")+":"+text(m.Parts))
			}
			if strings.Join(roles, "|") != "user:hi|agent:what is your name?|user:Ann" {
				t.Errorf("history %v", roles)
			}
			// The task is over: another message to it is refused; one to its context
			// starts a new task.
			fails(t, call(t, srv, tc.version, tc.method, map[string]any{"message": tc.msg("again", "taskId="+asked.ID)}), codeUnsupported)
			if fresh := send(tc.msg("new", "contextId="+asked.ContextID)); fresh.ID == asked.ID || fresh.ContextID != asked.ContextID {
				t.Errorf("new task in the context: %+v", fresh)
			}
		})
	}
}

func TestInputRequiredStream(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &inputExec{errs: make(chan error, 1)}})
	first := drain(t, stream(t, srv, "", "message/stream", map[string]any{"message": msg03("hi")}))
	checkIDs(t, first)
	last := decode[tObj](t, first[len(first)-1].Data.Result)
	if last.Kind != "status-update" || last.Status.State != "input-required" || last.Final == nil || !*last.Final {
		t.Fatalf("the stream must end at input-required with final: %+v", last)
	}
	second := drain(t, stream(t, srv, "", "message/stream", map[string]any{"message": msg03("Bob", "contextId="+last.ContextID)}))
	checkIDs(t, second)
	if second[0].ID <= first[len(first)-1].ID {
		t.Errorf("ids restart: %d after %d", second[0].ID, first[len(first)-1].ID)
	}
	var shape []string
	for _, e := range second {
		o := decode[tObj](t, e.Data.Result)
		shape = append(shape, o.Kind+":"+o.Status.State)
	}
	if strings.Join(shape, " ") != "task:working artifact-update: status-update:completed" {
		t.Fatalf("answer stream %v", shape)
	}
}

func TestInputErrors(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b})
	running := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{
		"message": msg03("x"), "configuration": map[string]any{"blocking": false}})))
	recv(t, b.started)
	// A running task that does not wait for input takes no message.
	fails(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("y", "taskId="+running.ID)}), codeUnsupported)
	// taskId and contextId must agree.
	fails(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("y", "taskId="+running.ID, "contextId=other")}), codeInvalidParams)
}

func TestInputTimeout(t *testing.T) {
	exec := &inputExec{errs: make(chan error, 1)}
	_, srv := newServer(t, Config{Executor: exec, Lifecycle: Lifecycle{InputTimeout: 20 * time.Millisecond}})
	asked := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	if asked.Status.State != "input-required" {
		t.Fatalf("send returned %+v", asked)
	}
	if err := recv(t, exec.errs); !errors.Is(err, ErrInputTimeout) {
		t.Fatalf("Input returned %v", err)
	}
	failed := waitState(t, srv, asked.ID, "failed")
	if failed.Status.Message == nil || text(failed.Status.Message.Parts) != "input-timeout" {
		t.Fatalf("failed with %+v", failed.Status)
	}
	// Too late now.
	fails(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("Ann", "taskId="+asked.ID)}), codeUnsupported)
}

func TestAcceptanceNone(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Lifecycle: Lifecycle{Acceptance: AcceptNone}})
	fails(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")}), codeUnsupported)
	fails(t, call(t, srv, "1.0", "SendMessage", map[string]any{"message": msg10("hi")}), codeUnsupported)
	events := drain(t, stream(t, srv, "", "message/stream", map[string]any{"message": msg03("hi")}))
	if len(events) != 1 || events[0].Data.Error == nil || events[0].Data.Error.Code != codeUnsupported {
		t.Fatalf("stream %+v", events)
	}
}

func TestAcceptanceSingle(t *testing.T) {
	b := newBlocking()
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newServer(t, Config{Executor: b, Metrics: metrics})
	done := make(chan tObj, 1)
	go func() {
		done <- decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("one", oneCtx)})))
	}()
	recv(t, b.started)
	second := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("two", oneCtx)})))
	if second.Status.State != "rejected" || second.Status.Message == nil || !strings.Contains(text(second.Status.Message.Parts), "busy") {
		t.Fatalf("concurrent send: %+v", second)
	}
	// A rejected stream is one task event, in its final state.
	events := drain(t, stream(t, srv, "", "message/stream", map[string]any{"message": msg03("three", oneCtx)}))
	if len(events) != 1 || decode[tObj](t, events[0].Data.Result).Status.State != "rejected" {
		t.Fatalf("rejected stream %+v", events)
	}
	b.release <- "first"
	if first := recv(t, done); first.Status.State != "completed" {
		t.Fatalf("first %+v", first)
	}
	// Whoever saw the first task end finds the slot free.
	go func() {
		done <- decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("four", oneCtx)})))
	}()
	if job := recv(t, b.started); job.Text != "four" {
		t.Fatalf("started %q", job.Text)
	}
	b.release <- "fourth"
	if fourth := recv(t, done); fourth.Status.State != "completed" {
		t.Fatalf("later send %+v", fourth)
	}
	if got := testutil.ToFloat64(metrics.Tasks.WithLabelValues("hello", "rejected")); got != 2 {
		t.Errorf("rejected count %v", got)
	}
	if got := testutil.ToFloat64(metrics.Tasks.WithLabelValues("hello", "completed")); got != 2 {
		t.Errorf("completed count %v", got)
	}
}

func TestAcceptanceQueue(t *testing.T) {
	b := newBlocking()
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newServer(t, Config{Executor: b, Metrics: metrics, Lifecycle: Lifecycle{Acceptance: AcceptQueue, QueueDepth: 2}})
	results := make(chan tObj, 5)
	start := make(chan struct{})
	for i := range 5 {
		go func() {
			<-start
			results <- decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03(fmt.Sprint("task ", i), oneCtx)})))
		}()
	}
	close(start) // all five at once
	// Exactly two are rejected at once: three were admitted, one running, two queued.
	for range 2 {
		if r := recv(t, results); r.Status.State != "rejected" || !strings.Contains(text(r.Status.Message.Parts), "queue is full") {
			t.Fatalf("got %+v before two rejections", r)
		}
	}
	if got := testutil.ToFloat64(metrics.QueueDepth.WithLabelValues("hello")); got != 2 {
		t.Errorf("queue depth %v", got)
	}
	if got := testutil.ToFloat64(metrics.InFlight.WithLabelValues("hello")); got != 1 {
		t.Errorf("in flight %v", got)
	}
	for i := range 3 {
		job := recv(t, b.started)
		b.release <- "answer to " + job.Text
		if got := testutil.ToFloat64(metrics.QueueDepth.WithLabelValues("hello")); i == 0 && got > 2 {
			t.Errorf("queue depth %v", got)
		}
	}
	for range 3 {
		r := recv(t, results)
		if r.Status.State != "completed" || text(r.Artifacts[0].Parts) != "answer to "+text(r.History[0].Parts) {
			t.Fatalf("admitted task %+v", r)
		}
	}
	if got := testutil.ToFloat64(metrics.QueueDepth.WithLabelValues("hello")); got != 0 {
		t.Errorf("queue depth at the end %v", got)
	}
	if got := testutil.ToFloat64(metrics.InFlight.WithLabelValues("hello")); got != 0 {
		t.Errorf("in flight at the end %v", got)
	}
	if got := testutil.ToFloat64(metrics.Tasks.WithLabelValues("hello", "rejected")); got != 2 {
		t.Errorf("rejected %v", got)
	}
}

func TestQueueFIFOAndCancelQueued(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b, Lifecycle: Lifecycle{Acceptance: AcceptQueue, QueueDepth: 3}})
	async := map[string]any{"blocking": false}
	var ids []string
	for _, name := range []string{"a", "b", "c", "d"} {
		task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03(name, oneCtx), "configuration": async})))
		want := "submitted"
		if name == "a" {
			want = "working"
			recv(t, b.started)
		}
		if task.Status.State != want {
			t.Fatalf("%s: %+v", name, task)
		}
		ids = append(ids, task.ID)
	}
	// Canceling a queued task takes it out of the queue.
	if c := decode[tObj](t, ok(t, call(t, srv, "", "tasks/cancel", map[string]any{"id": ids[2]}))); c.Status.State != "canceled" {
		t.Fatalf("cancel queued: %+v", c)
	}
	b.release <- "A"
	var order []string
	for range 2 {
		job := recv(t, b.started)
		order = append(order, job.Text)
		b.release <- strings.ToUpper(job.Text)
	}
	if !slices.Equal(order, []string{"b", "d"}) {
		t.Fatalf("ran %v after a, want b then d", order)
	}
	waitState(t, srv, ids[3], "completed")
}

func TestThreaded(t *testing.T) {
	for _, threaded := range []bool{false, true} {
		t.Run(fmt.Sprint("threaded=", threaded), func(t *testing.T) {
			exec := &echoExec{}
			_, srv := newServer(t, Config{Executor: exec, Lifecycle: Lifecycle{Threaded: threaded}})
			first := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("one")})))
			ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("two", "contextId="+first.ContextID)}))
			ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("elsewhere")}))
			jobs := exec.recorded()
			if !threaded {
				for _, j := range jobs {
					if j.History != nil {
						t.Errorf("stateless job with history %+v", j.History)
					}
				}
				return
			}
			if len(jobs[0].History) != 0 || jobs[0].History == nil {
				t.Errorf("first turn history %#v", jobs[0].History)
			}
			if want := []Turn{{User: "one", Agent: "echo: one"}}; !reflect.DeepEqual(jobs[1].History, want) {
				t.Errorf("second turn history %+v", jobs[1].History)
			}
			if len(jobs[2].History) != 0 {
				t.Errorf("another context sees %+v", jobs[2].History)
			}
		})
	}
}

func TestUpdateKeepsTasksInFlight(t *testing.T) {
	old := newBlocking()
	h, srv := newServer(t, Config{Executor: old, Lifecycle: Lifecycle{Acceptance: AcceptQueue, QueueDepth: 1}})
	first := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("first", oneCtx), "configuration": map[string]any{"blocking": false}})))
	recv(t, old.started)
	card := testCard()
	card.Description = "new and improved"
	if err := h.Update(Config{Card: card, Executor: &echoExec{prefix: "new "}, Lifecycle: Lifecycle{Acceptance: AcceptQueue, QueueDepth: 1}}); err != nil {
		t.Fatal(err)
	}
	// The card is the new one at once.
	if _, c := getCard(t, srv, prefix+"/.well-known/agent-card.json", nil); c["description"] != "new and improved" {
		t.Errorf("card after Update: %v", c["description"])
	}
	// A new task waits for the slot, then runs on the new executor; the old task
	// finishes on the old one and stays readable.
	second := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("second", oneCtx), "configuration": map[string]any{"blocking": false}})))
	if second.Status.State != "submitted" {
		t.Fatalf("second task %+v", second)
	}
	old.release <- "old answer"
	got := waitState(t, srv, first.ID, "completed")
	if text(got.Artifacts[0].Parts) != "old answer" {
		t.Errorf("first task %+v", got)
	}
	if s := waitState(t, srv, second.ID, "completed"); text(s.Artifacts[0].Parts) != "new echo: second" {
		t.Errorf("second task %+v", s)
	}
}

func TestShutdown(t *testing.T) {
	t.Run("waits for running tasks", func(t *testing.T) {
		b := newBlocking()
		h, srv := newServer(t, Config{Executor: b})
		task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x", oneCtx), "configuration": map[string]any{"blocking": false}})))
		recv(t, b.started)
		shut := make(chan error, 1)
		go func() { shut <- h.Shutdown(context.Background()) }()
		// New sends are refused while it drains; reads go on.
		for {
			r := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("y", oneCtx)})))
			if r.Status.State != "rejected" {
				t.Fatalf("send during shutdown: %+v", r)
			}
			if strings.Contains(text(r.Status.Message.Parts), "shutting down") {
				break
			}
		}
		ok(t, call(t, srv, "", "tasks/get", map[string]any{"id": task.ID}))
		b.release <- "finished"
		if err := recv(t, shut); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		waitState(t, srv, task.ID, "completed")
	})
	t.Run("a task waiting for input ends at once", func(t *testing.T) {
		e := &inputExec{errs: make(chan error, 1)}
		h, srv := newServer(t, Config{Executor: e})
		asked := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x", oneCtx)})))
		if asked.Status.State != "input-required" {
			t.Fatalf("task %+v", asked)
		}
		// No grace: Shutdown returns without its context ever ending.
		if err := h.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := recv(t, e.errs); err == nil {
			t.Error("Input returned no error")
		}
		waitState(t, srv, asked.ID, "canceled")
	})
	t.Run("interrupts what is left at the deadline", func(t *testing.T) {
		b := newBlocking()
		metrics, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		h, srv := newServer(t, Config{Executor: b, Metrics: metrics, Lifecycle: Lifecycle{Acceptance: AcceptQueue, QueueDepth: 1}})
		async := map[string]any{"blocking": false}
		running := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x", oneCtx), "configuration": async})))
		recv(t, b.started)
		queued := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("y", oneCtx), "configuration": async})))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v", err)
		}
		if id := recv(t, b.ctxDone); id != running.ID {
			t.Errorf("ctx of %s", id)
		}
		for _, id := range []string{running.ID, queued.ID} {
			if got := waitState(t, srv, id, "failed"); !strings.Contains(text(got.Status.Message.Parts), "interrupted: the gateway stopped while this task ran") {
				t.Errorf("task %s ended %+v", id, got.Status)
			}
		}
		if n := testutil.ToFloat64(metrics.Interrupted.WithLabelValues("hello")); n != 2 {
			t.Errorf("interrupted %v, want 2", n)
		}
	})
}

// TestSingleHammer releases many sends at once: exactly one is admitted.
func TestSingleHammer(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b})
	const n = 40
	states := make(chan string, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			r := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x", oneCtx), "configuration": map[string]any{"blocking": false}})))
			states <- r.Status.State
		}()
	}
	close(start)
	count := map[string]int{}
	for range n {
		count[recv(t, states)]++
	}
	if count["working"] != 1 || count["rejected"] != n-1 {
		t.Fatalf("states %v", count)
	}
	recv(t, b.started)
	b.release <- "done"
}

type panicExec struct{}

func (panicExec) Execute(context.Context, *Job) Outcome { panic("guest exploded") }

func TestExecutorPanic(t *testing.T) {
	_, srv := newServer(t, Config{Executor: panicExec{}})
	for range 2 { // the slot is freed after a panic
		task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x")})))
		if task.Status.State != "failed" || !strings.Contains(text(task.Status.Message.Parts), "guest exploded") {
			t.Fatalf("task %+v", task)
		}
	}
}

func TestFinishedTasksBounded(t *testing.T) {
	h, srv := newServer(t, Config{Executor: &echoExec{}})
	h.store = newMemoryStore(3)
	send := func(s string) string {
		return decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03(s)}))).ID
	}
	a, b, c := send("a"), send("b"), send("c")
	ok(t, call(t, srv, "", "tasks/get", map[string]any{"id": a})) // a is now used more recently than b
	d := send("d")
	fails(t, call(t, srv, "", "tasks/get", map[string]any{"id": b}), codeTaskNotFound)
	for _, id := range []string{a, c, d} {
		ok(t, call(t, srv, "", "tasks/get", map[string]any{"id": id}))
	}
}

func TestTurnStoreBounded(t *testing.T) {
	s := newTurnStore()
	for i := range maxTurns + 5 {
		s.add("c", Turn{User: fmt.Sprint(i)})
	}
	if got := s.get("c"); len(got) != maxTurns || got[0].User != "5" {
		t.Fatalf("kept %d turns from %q", len(got), got[0].User)
	}
	for i := range maxContexts {
		s.add(fmt.Sprint("ctx", i), Turn{})
	}
	if len(s.get("c")) != 0 || len(s.byID) != maxContexts {
		t.Fatalf("the oldest context survived: %d contexts", len(s.byID))
	}
}

// TestThreadBounded: a turn keeps its Thread's messages up to MaxThreadMessages; beyond
// that, its text and continuation only.
func TestThreadBounded(t *testing.T) {
	msgs := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	tests := []struct {
		name     string
		messages json.RawMessage
		kept     bool
	}{
		{"at the bound", msgs(MaxThreadMessages), true},
		{"beyond it", msgs(MaxThreadMessages + 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := Thread{Messages: tt.messages, Continuation: "c1", ContinuationBy: "d"}
			exec := execFunc(func(_ context.Context, job *Job) Outcome {
				return Outcome{State: "completed", Text: "ok", Thread: th}
			})
			h, srv := newServer(t, Config{Executor: exec, Lifecycle: Lifecycle{Threaded: true}})
			first := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("one")})))
			h.mu.Lock()
			got := h.store.turns(first.ContextID)
			h.mu.Unlock()
			if len(got) != 1 || got[0].Continuation != "c1" || got[0].ContinuationBy != "d" || (got[0].Messages != nil) != tt.kept {
				t.Errorf("kept %d turns, messages kept %v (want %v), continuation %q", len(got), got[0].Messages != nil, tt.kept, got[0].Continuation)
			}
		})
	}
}

// TestJobURL hands the executor the endpoint as the client reached it, for the capsule's
// MURMUR_CAPSULE_URL.
func TestJobURL(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b})
	call(t, srv, "", "message/send", map[string]any{"message": msg03("x"), "configuration": map[string]any{"blocking": false}})
	if job := recv(t, b.started); job.URL != endpoint(srv) {
		t.Errorf("job URL %q, want %q", job.URL, endpoint(srv))
	}
	b.release <- "done"
}
