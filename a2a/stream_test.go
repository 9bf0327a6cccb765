package a2a

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStream03 streams an answer as chunks of one artifact: the first chunk starts it, the
// next ones append to it, the last carries lastChunk, and the task's artifact is their
// concatenation.
func TestStream03(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	events := drain(t, stream(t, srv, "", "message/stream", map[string]any{"message": msg03("hello world")}))
	checkIDs(t, events)
	var kinds, chunks, appends []string
	var obj []tObj
	for _, e := range events {
		o := decode[tObj](t, e.Data.Result)
		obj = append(obj, o)
		kinds = append(kinds, o.Kind+":"+o.Status.State)
		if o.Kind == "artifact-update" {
			if o.Artifact == nil || o.Artifact.ArtifactID != "answer" || o.TaskID != obj[0].ID {
				t.Fatalf("artifact event %+v", o)
			}
			chunks = append(chunks, text(o.Artifact.Parts))
			appends = append(appends, fmt.Sprint(o.Append, o.LastChunk))
		}
	}
	want := []string{"task:submitted", "status-update:working", "artifact-update:", "artifact-update:", "artifact-update:",
		"artifact-update:", "status-update:completed"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v\nwant   %v", kinds, want)
	}
	if strings.Join(chunks, "") != "echo: hello world" || len(chunks) != 4 {
		t.Errorf("chunks %q", chunks)
	}
	if got := strings.Join(appends, ","); got != "false false,true false,true false,true true" {
		t.Errorf("(append, lastChunk) of the chunks: %s", got)
	}
	last := obj[len(obj)-1]
	if last.Final == nil || !*last.Final || last.TaskID != obj[0].ID || last.ContextID != obj[0].ContextID {
		t.Errorf("final event %+v", last)
	}
	if o := obj[1]; o.Final == nil || *o.Final {
		t.Errorf("a working update is final or lacks final: %+v", o)
	}
	got := decode[tObj](t, ok(t, call(t, srv, "", "tasks/get", map[string]any{"id": obj[0].ID})))
	if len(got.Artifacts) != 1 || text(got.Artifacts[0].Parts) != strings.Join(chunks, "") {
		t.Errorf("the task's artifacts %+v are not the chunks' concatenation %q", got.Artifacts, strings.Join(chunks, ""))
	}
}

func TestStream10(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	events := drain(t, stream(t, srv, "1.0", "SendStreamingMessage", map[string]any{"message": msg10("hi")}))
	checkIDs(t, events)
	var shape []string
	for _, e := range events {
		w := decode[tWrap](t, e.Data.Result)
		switch {
		case w.Task != nil:
			shape = append(shape, "task:"+w.Task.Status.State)
		case w.StatusUpdate != nil:
			if w.StatusUpdate.Final != nil || w.StatusUpdate.Kind != "" {
				t.Errorf("1.0 status update with final or kind: %s", e.Data.Result)
			}
			shape = append(shape, "status:"+w.StatusUpdate.Status.State)
		case w.ArtifactUpdate != nil:
			shape = append(shape, "artifact:"+text(w.ArtifactUpdate.Artifact.Parts))
		default:
			t.Fatalf("empty StreamResponse %s", e.Data.Result)
		}
	}
	want := "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING artifact:ec artifact:ho: artifact: hi " +
		"artifact: status:TASK_STATE_COMPLETED"
	if strings.Join(shape, " ") != want {
		t.Fatalf("events %v", shape)
	}
}

func TestCancel(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b})
	task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{
		"message": msg03("wait"), "configuration": map[string]any{"blocking": false}})))
	if task.Status.State != "working" {
		t.Fatalf("non-blocking send returned %+v", task)
	}
	recv(t, b.started)
	canceled := decode[tObj](t, ok(t, call(t, srv, "", "tasks/cancel", map[string]any{"id": task.ID})))
	if canceled.Status.State != "canceled" {
		t.Fatalf("cancel returned %+v", canceled)
	}
	if id := recv(t, b.ctxDone); id != task.ID {
		t.Fatalf("context of %s ended, want %s", id, task.ID)
	}
	// The executor's "failed" outcome after the cancel is ignored.
	got := decode[tObj](t, ok(t, call(t, srv, "", "tasks/get", map[string]any{"id": task.ID})))
	if got.Status.State != "canceled" {
		t.Fatalf("after Execute returned: %+v", got)
	}
	fails(t, call(t, srv, "", "tasks/cancel", map[string]any{"id": task.ID}), codeNotCancelable)
	fails(t, call(t, srv, "1.0", "CancelTask", map[string]any{"id": task.ID}), codeNotCancelable)
}

// TestCancelHoldsSlot: a canceled guest that keeps running still holds the slot, so
// no second task runs beside it.
func TestCancelHoldsSlot(t *testing.T) {
	b := newBlocking()
	b.ignoreCtx = true
	_, srv := newServer(t, Config{Executor: b})
	first := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{
		"message": msg03("one", oneCtx), "configuration": map[string]any{"blocking": false}})))
	recv(t, b.started)
	ok(t, call(t, srv, "", "tasks/cancel", map[string]any{"id": first.ID}))
	second := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("two", oneCtx)})))
	if second.Status.State != "rejected" {
		t.Fatalf("a task ran beside a canceled one still executing: %+v", second)
	}
	b.release <- "ignored"
	if id := recv(t, b.ctxDone); id != first.ID {
		t.Fatalf("ctx of %s", id)
	}
	waitState(t, srv, first.ID, "canceled")
	// The slot is free once Execute has returned, a moment after it said ctxDone: until
	// then a send is still rejected, after it the next one is served (bounded retries).
	var third tObj
	for i := 0; ; i++ {
		third = decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{
			"message": msg03("three", oneCtx), "configuration": map[string]any{"blocking": false}})))
		if third.Status.State != "rejected" {
			break
		}
		if i == 1000 {
			t.Fatal("the slot was never released after the canceled task's Execute returned")
		}
	}
	if job := recv(t, b.started); job.Text != "three" {
		t.Fatalf("started %q", job.Text)
	}
	b.release <- "third"
	waitState(t, srv, third.ID, "completed")
}

func TestResubscribe(t *testing.T) {
	for _, v := range []struct{ version, send, resub string }{
		{"", "message/stream", "tasks/resubscribe"},
		{"1.0", "SendStreamingMessage", "SubscribeToTask"},
	} {
		t.Run(v.resub, func(t *testing.T) {
			b := newBlocking()
			_, srv := newServer(t, Config{Executor: b})
			msg := msg03("slow")
			if v.version == "1.0" {
				msg = msg10("slow")
			}
			first := stream(t, srv, v.version, v.send, map[string]any{"message": msg})
			created := next(t, first)
			id := taskOf(t, v.version, created).ID
			job := recv(t, b.started)
			job.Chunk("partial")
			// Wait until the chunk is in the task's stream before resubscribing.
			for {
				e := next(t, first)
				if o := taskOf(t, v.version, e); o.Artifact != nil && text(o.Artifact.Parts) == "partial" {
					break
				}
			}
			second := stream(t, srv, v.version, v.resub, map[string]any{"id": id})
			snap := next(t, second)
			st := taskOf(t, v.version, snap)
			if st.ID != id || !strings.HasSuffix(strings.ToLower(st.Status.State), "working") || (v.version == "" && st.Kind != "task") {
				t.Fatalf("resubscribe began with %s", snap.Data.Result)
			}
			b.release <- "done"
			after := drain(t, second)
			checkIDs(t, append([]sseEvent{snap}, after...))
			if len(after) != 2 {
				t.Fatalf("after the snapshot: %d events", len(after))
			}
			if a := taskOf(t, v.version, after[0]); a.Artifact == nil || text(a.Artifact.Parts) != "done" {
				t.Errorf("artifact %s", after[0].Data.Result)
			}
			if f := taskOf(t, v.version, after[1]); !strings.HasSuffix(strings.ToLower(f.Status.State), "completed") {
				t.Errorf("final %s", after[1].Data.Result)
			}
			// The first stream saw the same ending, with the same ids.
			firstRest := drain(t, first)
			if len(firstRest) != 2 || firstRest[0].ID != after[0].ID || firstRest[1].ID != after[1].ID {
				t.Errorf("first stream ended with %+v", firstRest)
			}
			// A finished task: 0.3 answers its final state, 1.0 refuses with a plain
			// JSON-RPC error (conformance_test.go pins the exact answer).
			if v.version == "1.0" {
				fails(t, call(t, srv, v.version, v.resub, map[string]any{"id": id}), codeUnsupported)
				return
			}
			end := drain(t, stream(t, srv, v.version, v.resub, map[string]any{"id": id}))
			if len(end) != 1 {
				t.Fatalf("resubscribe to a finished task: %+v", end)
			}
			if o := taskOf(t, "", end[0]); o.Kind != "task" || o.Status.State != "completed" {
				t.Errorf("0.3 resubscribe to a finished task: %s", end[0].Data.Result)
			}
		})
	}
}

// taskOf decodes an event of either dialect into the union shape.
func taskOf(t *testing.T, version string, e sseEvent) tObj {
	t.Helper()
	if e.Data.Error != nil {
		t.Fatalf("error event %+v", e.Data.Error)
	}
	if version != "1.0" {
		return decode[tObj](t, e.Data.Result)
	}
	w := decode[tWrap](t, e.Data.Result)
	switch {
	case w.Task != nil:
		return *w.Task
	case w.StatusUpdate != nil:
		return *w.StatusUpdate
	case w.ArtifactUpdate != nil:
		return *w.ArtifactUpdate
	}
	t.Fatalf("empty StreamResponse %s", e.Data.Result)
	return tObj{}
}

// gatedWriter is a response writer whose writes wait for a gate: a subscriber that
// stops reading.
type gatedWriter struct {
	header  http.Header
	blocked chan struct{} // closed at the first write that waits
	gate    chan struct{} // closed to let writes through
	once    sync.Once
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (g *gatedWriter) Header() http.Header { return g.header }
func (g *gatedWriter) WriteHeader(int)     {}
func (g *gatedWriter) Flush()              {}
func (g *gatedWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.blocked) })
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func TestLaggedSubscriber(t *testing.T) {
	for _, version := range []string{"", "1.0"} {
		t.Run("v"+version, func(t *testing.T) {
			b := newBlocking()
			h, err := NewHandler(Config{Card: testCard(), Executor: b})
			if err != nil {
				t.Fatal(err)
			}
			h.ringSize = 8
			defer func() { _ = h.Shutdown(context.Background()) }()
			method, msg := "message/stream", msg03("go")
			if version == "1.0" {
				method, msg = "SendStreamingMessage", msg10("go")
			}
			req := httptest.NewRequest(http.MethodPost, prefix+"/", bytes.NewReader(request(method, map[string]any{"message": msg})))
			if version != "" {
				req.Header.Set("A2A-Version", version)
			}
			w := &gatedWriter{header: http.Header{}, blocked: make(chan struct{}), gate: make(chan struct{})}
			served := make(chan struct{})
			go func() { defer close(served); h.ServeHTTP(w, req) }()
			job := recv(t, b.started)
			recv(t, w.blocked) // the subscriber is stuck on its first events
			for i := range 30 {
				job.Chunk("c" + string(rune('a'+i%26)))
			}
			b.release <- "answer"
			close(w.gate)
			recv(t, served)

			var events []sseEvent
			for e := range parseSSE(bytes.NewReader(w.buf.Bytes())) {
				events = append(events, e)
			}
			checkIDs(t, events)
			lag := -1
			for i, e := range events {
				if e.Name == "lagged" {
					lag = i
				}
			}
			if lag < 0 || lag+1 >= len(events) {
				t.Fatalf("no lagged notice followed by a resync among %d events", len(events))
			}
			notice := taskOf(t, version, events[lag])
			info, _ := notice.Metadata["lagged"].(map[string]any)
			if info == nil || info["missed"].(float64) < 20 || uint64(info["firstMissedId"].(float64)) != events[lag].ID {
				t.Errorf("notice %s", events[lag].Data.Result)
			}
			resync := taskOf(t, version, events[lag+1])
			if version == "" && resync.Kind != "task" || resync.ID == "" {
				t.Errorf("resync %s", events[lag+1].Data.Result)
			}
			// No chunk after the gap is lost silently: everything after the notice is the
			// resync and the live tail, which ends the task.
			lastState := ""
			for _, e := range events[lag+1:] {
				if s := taskOf(t, version, e).Status.State; s != "" {
					lastState = s
				}
			}
			if !strings.HasSuffix(strings.ToLower(lastState), "completed") {
				t.Errorf("stream ended at %q", lastState)
			}
		})
	}
}

func TestHeartbeat(t *testing.T) {
	b := newBlocking()
	h, srv := newServer(t, Config{Executor: b})
	h.heartbeat = 5 * time.Millisecond
	req, err := http.NewRequest(http.MethodPost, endpoint(srv), bytes.NewReader(request("message/stream", map[string]any{"message": msg03("x")})))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	recv(t, b.started)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(watchdog)
	for {
		select {
		case line, open := <-lines:
			if !open {
				t.Fatal("the stream ended without a heartbeat")
			}
			if line == ": keep-alive" {
				b.release <- "done"
				for range lines { // drain to the end of the stream
				}
				return
			}
		case <-timeout:
			t.Fatal("no heartbeat within the watchdog")
		}
	}
}

// TestThinkingChunks: streamed thinking reaches subscribers as a working status whose
// part is marked with metadata {"thinking": true}, in both versions; answer text is an
// unmarked artifact chunk.
func TestThinkingChunks(t *testing.T) {
	for _, v := range []struct{ version, send string }{{"", "message/stream"}, {"1.0", "SendStreamingMessage"}} {
		t.Run(v.send, func(t *testing.T) {
			b := newBlocking()
			_, srv := newServer(t, Config{Executor: b})
			msg := msg03("think")
			if v.version == "1.0" {
				msg = msg10("think")
			}
			s := stream(t, srv, v.version, v.send, map[string]any{"message": msg})
			next(t, s)
			job := recv(t, b.started)
			job.Thinking("pondering")
			job.Chunk("answer")
			b.release <- "answer"
			var got []string
			for _, e := range drain(t, s) {
				raw := string(e.Data.Result)
				if !strings.Contains(raw, "pondering") && !strings.Contains(raw, `"text":"answer"`) || strings.Contains(raw, "lastChunk\":true") {
					continue
				}
				got = append(got, fmt.Sprint(strings.Contains(raw, "pondering"), strings.Contains(raw, `"metadata":{"thinking":true}`)))
			}
			if strings.Join(got, ",") != "true true,false false" {
				t.Errorf("(thinking, marked) of the chunks: %v", got)
			}
		})
	}
}
