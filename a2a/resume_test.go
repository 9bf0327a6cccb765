package a2a

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// chattyExec streams n chunks, then waits for release.
type chattyExec struct {
	n       int
	sent    chan struct{}
	release chan string
}

func (e *chattyExec) Execute(ctx context.Context, job *Job) Outcome {
	for i := range e.n {
		job.Chunk(fmt.Sprint("chunk ", i))
	}
	close(e.sent)
	select {
	case ans := <-e.release:
		return Outcome{State: "completed", Text: ans}
	case <-ctx.Done():
		return Outcome{State: "failed", Text: "canceled"}
	}
}

// TestResumeWithLastEventID: a client that lost its stream resubscribes with the id of
// the last event it saw and gets exactly the events after it, then the rest live, with
// the same ids — in both dialects.
func TestResumeWithLastEventID(t *testing.T) {
	for _, v := range []struct{ version, send, resub string }{
		{"", "message/stream", "tasks/resubscribe"},
		{"1.0", "SendStreamingMessage", "SubscribeToTask"},
	} {
		t.Run(v.resub, func(t *testing.T) {
			e := &chattyExec{n: 5, sent: make(chan struct{}), release: make(chan string)}
			_, srv := newServer(t, Config{Executor: e})
			msg := msg03("go")
			if v.version == "1.0" {
				msg = msg10("go")
			}
			first := stream(t, srv, v.version, v.send, map[string]any{"message": msg})
			<-e.sent
			// submitted, working, 5 chunks: the first stream saw ids 1..7.
			var seen []sseEvent
			for len(seen) < 7 {
				seen = append(seen, next(t, first))
			}
			id := taskOf(t, v.version, seen[0]).ID
			if id == "" {
				id = taskOf(t, v.version, seen[0]).TaskID
			}
			const last = 4 // the client saw events up to id 4, then lost the connection
			resumed := streamWith(t, srv, v.version, v.resub, map[string]any{"id": id}, map[string]string{"Last-Event-ID": fmt.Sprint(last)})
			var replay []sseEvent
			for range 3 { // ids 5, 6, 7 from the buffer
				replay = append(replay, next(t, resumed))
			}
			e.release <- "done"
			replay = append(replay, drain(t, resumed)...)
			firstRest := drain(t, first)
			want := append(seen[last:], firstRest...)
			if len(replay) != len(want) {
				t.Fatalf("resumed stream had %d events, want %d", len(replay), len(want))
			}
			for i := range want {
				if replay[i].ID != want[i].ID || !bytes.Equal(replay[i].Data.Result, want[i].Data.Result) {
					t.Errorf("event %d: id %d %s, want id %d %s", i, replay[i].ID, replay[i].Data.Result, want[i].ID, want[i].Data.Result)
				}
			}
			if replay[0].ID != last+1 {
				t.Errorf("resumed at id %d, want %d", replay[0].ID, last+1)
			}
		})
	}
}

// TestResumeBeyondTheEnd: a Last-Event-ID past the newest event (a client of another
// gateway, or a bad header) resumes at the next event, never skipping any; a malformed one
// is ignored and the stream starts with the task's state.
func TestResumeBeyondTheEnd(t *testing.T) {
	e := &chattyExec{n: 1, sent: make(chan struct{}), release: make(chan string)}
	_, srv := newServer(t, Config{Executor: e})
	first := stream(t, srv, "", "message/stream", map[string]any{"message": msg03("go")})
	<-e.sent
	var seen []sseEvent
	for len(seen) < 3 { // submitted, working, the chunk
		seen = append(seen, next(t, first))
	}
	id := taskOf(t, "", seen[0]).ID
	far := streamWith(t, srv, "", "tasks/resubscribe", map[string]any{"id": id}, map[string]string{"Last-Event-ID": "999"})
	bad := streamWith(t, srv, "", "tasks/resubscribe", map[string]any{"id": id}, map[string]string{"Last-Event-ID": "x"})
	if snap := next(t, bad); taskOf(t, "", snap).Kind != "task" {
		t.Errorf("a malformed Last-Event-ID: stream began with %s", snap.Data.Result)
	}
	e.release <- "done"
	got := drain(t, far)
	if len(got) == 0 || got[0].ID != seen[2].ID+1 {
		t.Fatalf("resumed past the end: %+v, want the events from id %d", got, seen[2].ID+1)
	}
	drain(t, first)
	drain(t, bad)
}
