package a2a

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestContexts: contexts run side by side up to the concurrency; the tasks of one
// context run in order; single refuses a second task only within its own context.
func TestContexts(t *testing.T) {
	async := map[string]any{"blocking": false}
	send := func(t *testing.T, srv *httptest.Server, text, ctx string) tObj {
		t.Helper()
		return decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03(text, "contextId="+ctx), "configuration": async})))
	}
	t.Run("two contexts side by side", func(t *testing.T) {
		b := newBlocking()
		_, srv := newServer(t, Config{Executor: b, Lifecycle: Lifecycle{Concurrency: 2}})
		for _, c := range []string{"ctx_a", "ctx_b"} {
			if tk := send(t, srv, c, c); tk.Status.State != "working" {
				t.Fatalf("%s: %+v", c, tk)
			}
		}
		// Both are inside Execute at once: neither needed the other to end.
		seen := map[string]bool{recv(t, b.started).ContextID: true, recv(t, b.started).ContextID: true}
		if !seen["ctx_a"] || !seen["ctx_b"] {
			t.Fatalf("started %v", seen)
		}
		b.release <- "1"
		b.release <- "2"
	})
	t.Run("one context in order", func(t *testing.T) {
		b := newBlocking()
		_, srv := newServer(t, Config{Executor: b, Lifecycle: Lifecycle{Concurrency: 4, Acceptance: AcceptQueue, QueueDepth: 2}})
		first := send(t, srv, "first", "ctx_same")
		second := send(t, srv, "second", "ctx_same")
		if first.Status.State != "working" || second.Status.State != "submitted" {
			t.Fatalf("first %s, second %s", first.Status.State, second.Status.State)
		}
		if job := recv(t, b.started); job.Text != "first" {
			t.Fatalf("started %q", job.Text)
		}
		select {
		case job := <-b.started:
			t.Fatalf("%q started while its context's first task ran", job.Text)
		default:
		}
		b.release <- "one"
		if job := recv(t, b.started); job.Text != "second" {
			t.Fatalf("started %q", job.Text)
		}
		b.release <- "two"
		waitState(t, srv, second.ID, "completed")
	})
	t.Run("single refuses within a context only", func(t *testing.T) {
		b := newBlocking()
		_, srv := newServer(t, Config{Executor: b, Lifecycle: Lifecycle{Concurrency: 4}})
		send(t, srv, "x", "ctx_1")
		recv(t, b.started)
		if tk := send(t, srv, "y", "ctx_1"); tk.Status.State != "rejected" || !strings.Contains(text(tk.Status.Message.Parts), "this context is busy") {
			t.Fatalf("same context: %+v", tk)
		}
		if tk := send(t, srv, "z", "ctx_2"); tk.Status.State != "working" {
			t.Fatalf("other context: %+v", tk)
		}
		recv(t, b.started)
		b.release <- "1"
		b.release <- "2"
	})
	t.Run("a reload that raises concurrency starts waiting tasks", func(t *testing.T) {
		b := newBlocking()
		h, srv := newServer(t, Config{Executor: b, Lifecycle: Lifecycle{Concurrency: 1}})
		send(t, srv, "first", "ctx_1")
		recv(t, b.started)
		if w := send(t, srv, "second", "ctx_2"); w.Status.State != "submitted" {
			t.Fatalf("second %+v", w)
		}
		if err := h.Update(Config{Executor: b, Card: testCard(), Lifecycle: Lifecycle{Concurrency: 2}}); err != nil {
			t.Fatal(err)
		}
		if job := recv(t, b.started); job.Text != "second" {
			t.Fatalf("started %q", job.Text)
		}
		b.release <- "1"
		b.release <- "2"
	})
	t.Run("concurrency bounds the contexts running", func(t *testing.T) {
		b := newBlocking()
		metrics, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		_, srv := newServer(t, Config{Executor: b, Metrics: metrics, Lifecycle: Lifecycle{Concurrency: 2}})
		send(t, srv, "p", "ctx_p")
		send(t, srv, "q", "ctx_q")
		r := send(t, srv, "r", "ctx_r")
		if r.Status.State != "submitted" {
			t.Fatalf("a third context beyond concurrency 2: %+v", r)
		}
		recv(t, b.started)
		recv(t, b.started)
		if in, q := testutil.ToFloat64(metrics.InFlight.WithLabelValues("hello")), testutil.ToFloat64(metrics.QueueDepth.WithLabelValues("hello")); in != 2 || q != 1 {
			t.Errorf("in flight %v, queued %v", in, q)
		}
		b.release <- "done"
		if job := recv(t, b.started); job.Text != "r" {
			t.Fatalf("started %q", job.Text)
		}
		b.release <- "done"
		b.release <- "done"
		waitState(t, srv, r.ID, "completed")
	})
}
