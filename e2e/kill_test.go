package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// killScenario is the kill -9 case every task store passes (TestGateway's on bbolt,
// TestPostgresDurable's on PostgreSQL): a completed task on the wordcount route, one
// waiting for input in the only slot of the slot route, one queued behind it with a push
// config to hooks, and a client that streamed the waiting one; the gateway is killed and
// started again on the same store, afterRestart runs, and then: the completed task is
// kept, the waiting one ends failed (its message holds interrupted) and its client resumes with exactly the
// interruption, the queued one runs and its webhook hears every state in order, and a
// client resuming the completed task from its first event gets the rest. It returns the
// completed task's id.
func killScenario(t *testing.T, g *gateway, hooks *webhooks, wordcount, slot, interrupted string, afterRestart func()) string {
	t.Helper()
	done := decodeTask(t, g.call(t, wordcount, "", "message/send", map[string]any{"message": msg03("one two three")}))
	// The slot's route has one slot (concurrency 1): the waiting task holds it.
	asked := decodeTask(t, g.call(t, slot, "", "message/send", map[string]any{"message": msg03("ask")}))
	if done.Status.State != "completed" || asked.Status.State != "input-required" {
		t.Fatalf("before the kill: %v / %v", done, asked)
	}
	// Another context waits for that slot: admitted, never started. Its push config has its
	// webhook hear of every change, across the restart.
	queued := decodeTask(t, g.call(t, slot, "", "message/send",
		map[string]any{"message": msg03("after the restart"), "configuration": map[string]any{"blocking": false,
			"pushNotificationConfig": map[string]any{"url": hooks.srv.URL + "/queued", "token": "hook-token"}}}))
	if queued.Status.State != "submitted" {
		t.Fatalf("queued before the kill: %v", queued)
	}
	// A client streaming the waiting task has seen up to the id a resubscribe shows now: its
	// first event, the task as it is (the stream of a task waiting for input stays open,
	// until the kill).
	seen := (<-g.stream(t, slot, "", "tasks/resubscribe", map[string]any{"id": asked.ID})).id
	if seen == 0 {
		t.Fatal("the waiting task's stream carried no event ids")
	}

	g.killAndRestart(t)
	afterRestart()

	got := decodeTask(t, g.call(t, wordcount, "", "tasks/get", map[string]any{"id": done.ID}))
	if got.Status.State != "completed" || !strings.Contains(got.text(), "3 words") {
		t.Errorf("the completed task after the restart = %v", got)
	}
	// That client reconnects with the last id it saw: it gets exactly what it missed, the
	// interruption (on a fleet's store, once the killed gateway's lease ran out).
	var missed []sseEvent
	for ev := range g.streamWith(t, slot, "", "tasks/resubscribe", map[string]any{"id": asked.ID}, "Last-Event-ID", fmt.Sprint(seen)) {
		missed = append(missed, ev)
	}
	if len(missed) != 1 || missed[0].id != seen+1 || !strings.Contains(string(missed[0].data), interrupted) {
		t.Errorf("resumed the interrupted task after id %d: %d events %+v", seen, len(missed), missed)
	}
	gone := decodeTask(t, g.call(t, slot, "", "tasks/get", map[string]any{"id": asked.ID}))
	if gone.Status.State != "failed" || !strings.Contains(gone.String(), interrupted) {
		t.Errorf("the waiting task after the restart = %v", gone)
	}
	// The queued task runs after the restart, in the slot the interrupted one freed.
	_, final := streamEnd(g.stream(t, slot, "", "tasks/resubscribe", map[string]any{"id": queued.ID}))
	if ran := decodeTask(t, g.call(t, slot, "", "tasks/get", map[string]any{"id": queued.ID})); ran.Status.State != "completed" || !strings.Contains(ran.text(), "after the restart") {
		t.Errorf("the queued task after the restart = %v (stream ended %q)", ran, final)
	}
	// Its webhook got every state, in order, before and after the restart (at least once:
	// an event delivered just before the kill may come again, never out of order).
	var states []string
	for !slices.Contains(states, "completed") {
		select {
		case <-hooks.new:
		case <-time.After(30 * time.Second):
			t.Fatalf("the queued task's webhook got %v", states)
		}
		states = states[:0]
		for _, p := range hooks.posts("/queued") {
			var tk task03
			if json.Unmarshal(p.body, &tk) != nil || tk.ID != queued.ID || p.token != "hook-token" {
				t.Fatalf("webhook post: token %q, body %s", p.token, p.body)
			}
			if len(states) == 0 || states[len(states)-1] != tk.Status.State {
				states = append(states, tk.Status.State)
			}
		}
	}
	if want := []string{"submitted", "working", "completed"}; !slices.Equal(states, want) {
		t.Errorf("the queued task's webhook saw states %v, want %v", states, want)
	}
	// A client that saw the completed task's first event resumes from the journal to the end.
	ids, final := streamEnd(g.streamWith(t, wordcount, "", "tasks/resubscribe", map[string]any{"id": done.ID}, "Last-Event-ID", "1"))
	consecutive := len(ids) > 0
	for i, id := range ids {
		consecutive = consecutive && id == i+2
	}
	if !consecutive || final != "completed" {
		t.Errorf("resumed after the restart: ids %v, final %q", ids, final)
	}

	return done.ID
}
