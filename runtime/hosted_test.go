package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// recordSink keeps the events a task's subscriber saw.
type recordSink struct {
	mu     sync.Mutex
	events []*Event
	seen   chan string // event types, as they arrive
}

func (r *recordSink) Event(e *Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.seen != nil {
		r.seen <- e.Type
	}
	return nil
}

func (r *recordSink) chunks() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		if c, ok := e.Data.(Chunk); ok {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// hostGatewayCapsule hosts the gateway test script capsule.
func hostGatewayCapsule(t *testing.T, e *Runtime) *Hosted {
	t.Helper()
	return hostGatewayCapsuleWith(t, e, "", ServeOptions{})
}

// hostGatewayCapsuleWith hosts it with a network.allow rule (when allow is set) and opts.
func hostGatewayCapsuleWith(t testing.TB, e *Runtime, allow string, opts ServeOptions) *Hosted {
	t.Helper()
	return hostGatewayCapsuleLife(t, e, allow, "{conversation: threaded}", opts)
}

// hostGatewayCapsuleLife is hostGatewayCapsuleWith with the manifest's lifecycle given.
func hostGatewayCapsuleLife(t testing.TB, e *Runtime, allow, lifecycle string, opts ServeOptions) *Hosted {
	t.Helper()
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	reg := registry.NewLocal(t.TempDir())
	publishWasm(t, reg, "gatetool", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))
	network := ""
	if allow != "" {
		network = "  network: {allow: [\"" + allow + "\"]}\n"
	}
	os.WriteFile(mpath, []byte("name: hosted\nversion: 2.0.0\nartifacts:\n  - {name: gatetool, version: 1.0.0}\ncapabilities:\n"+network+
		"  limits: {memory_bytes: 134217728, deadline_seconds: 120}\nlifecycle: "+lifecycle+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/gateway"), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	opts.Registry, opts.Session.WorkRoot = reg, t.TempDir()
	h, err := e.Serve(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHostedTasks runs several tasks in one context (one session): each gets its own
// answer and chunk stream, input is asked through the request's hook, and a canceled
// task stops its guest without counting a trap.
func TestHostedTasks(t *testing.T) {
	e, reg := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	h := hostGatewayCapsule(t, e)

	answer := func(ctx context.Context, prompt string) (Answer, error) { return Answer{Text: "yes to " + prompt}, nil }
	tests := []struct {
		name       string
		text       string
		input      func(context.Context, string) (Answer, error)
		wantState  string
		wantResult string
		wantChunks string
	}{
		{"echo", "hello", nil, StateCompleted, "hello (version 2.0.0)", "echo: hello\n"},
		{"second task, own answer", "again", nil, StateCompleted, "again (version 2.0.0)", "echo: again\n"},
		{"input asked", "ask", answer, StateCompleted, "answered yes to what should I say? (version 2.0.0)", "echo: answered yes to what should I say?\n"},
		{"input outside A2A", "ask", nil, StateFailed, "request-input called outside an A2A task", ""},
	}
	urls := map[string]string{"echo": "http://gw.example/agents/hosted/"}
	const ctxID = "ctx_hosted"
	var layout *Layout
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &recordSink{}
			trapsBefore := sumCounter(t, e.engine.Metrics().Traps)
			out := h.RunTask(context.Background(), TaskRequest{ContextID: ctxID, Text: tt.text, Sink: sink, RequestInput: tt.input, CapsuleURL: urls[tt.name]})
			if layout == nil {
				layout = out.Layout
			} else if out.Layout != layout {
				t.Errorf("a task of the same context ran in another session (%s)", out.Session)
			}
			if out.State != tt.wantState || !strings.Contains(out.Result, tt.wantResult) {
				t.Fatalf("outcome = %+v", out)
			}
			// The receipt's traps are what the trap counter counted for the task.
			rc := out.Receipt
			traps := 0
			for _, n := range rc.Traps {
				traps += n
			}
			if rc.GuestSeconds <= 0 || rc.PeakGuestMemoryBytes == 0 || len(rc.Tokens) != 0 || float64(traps) != sumCounter(t, e.engine.Metrics().Traps)-trapsBefore {
				t.Errorf("receipt %+v", rc)
			}
			if u := urls[tt.name]; u != "" && !strings.Contains(out.Result, "at "+u) {
				t.Errorf("the guest did not see MURMUR_CAPSULE_URL %s: %q", u, out.Result)
			}
			if u := urls[tt.name]; u != "" {
				if md, err := os.ReadFile(filepath.Join(out.Layout.Work, "MURMUR.md")); err != nil || !strings.Contains(string(md), "- Capsule URL: "+u+"\n") {
					t.Errorf("MURMUR.md does not name the capsule URL %s: %q, %v", u, md, err)
				}
			}
			if got := sink.chunks(); got != tt.wantChunks {
				t.Errorf("chunks = %q, want %q", got, tt.wantChunks)
			}
			if tt.wantState == StateCompleted {
				own, err := os.ReadFile(filepath.Join(out.Layout.Work, "out", "result_"+out.TaskID+".txt"))
				if err != nil || !strings.HasPrefix(strings.TrimSpace(string(own)), tt.wantResult) {
					t.Errorf("threaded result file = %q, %v", own, err)
				}
			}
		})
	}

	t.Run("cancel stops a spinning guest", func(t *testing.T) {
		trapsBefore := sumCounter(t, e.engine.Metrics().Traps)
		ctx, cancel := context.WithCancel(context.Background())
		sink := &recordSink{seen: make(chan string, 16)}
		done := make(chan TaskOutcome)
		go func() { done <- h.RunTask(ctx, TaskRequest{ContextID: ctxID, Text: "spin", Sink: sink}) }()
		for typ := range sink.seen {
			if typ == EventChunk {
				break
			}
		}
		cancel()
		out := <-done
		if out.State != StateCanceled {
			t.Fatalf("outcome = %+v", out)
		}
		if n := sumCounter(t, e.engine.Metrics().Traps); n != trapsBefore {
			t.Errorf("a cancel counted %v traps", n-trapsBefore)
		}
		if rc := out.Receipt; rc == nil || len(rc.Traps) != 0 || rc.GuestSeconds <= 0 {
			t.Errorf("a canceled task's receipt %+v: the cancel is no trap, the time inside the guest counts", rc)
		}
		if n := testutil.ToFloat64(e.engine.Metrics().Calls.WithLabelValues("hosted", "gatetool", "tool", wasm.ReasonCanceled)); n != 1 {
			t.Errorf("canceled calls = %v", n)
		}
		// The session goes on: the next task is served.
		if out := h.RunTask(context.Background(), TaskRequest{ContextID: ctxID, Text: "after"}); out.State != StateCompleted {
			t.Errorf("task after cancel = %+v", out)
		}
	})
	_ = reg

	t.Run("retired: no new task, the session stays open for the running one", func(t *testing.T) {
		h2 := hostGatewayCapsule(t, e)
		h2.Retire()
		if _, ok := h2.TryRunTask(context.Background(), TaskRequest{Text: "hi"}); ok {
			t.Error("a retired capsule started a task")
		}
		if out := h2.RunTask(context.Background(), TaskRequest{Text: "hi"}); out.State != StateFailed {
			t.Errorf("RunTask on a retired capsule = %+v", out)
		}
		if err := h2.Close(); err != nil {
			t.Error(err)
		}
	})

	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if out := h.RunTask(context.Background(), TaskRequest{Text: "late"}); out.State != StateFailed {
		t.Errorf("task after Close = %+v", out)
	}
	trace, _ := os.ReadFile(filepath.Join(layout.Root, "trace.jsonl"))
	if n := strings.Count(string(trace), `"event_type":"task_end"`); n != 6 {
		t.Errorf("trace has %d task_end events, want 6", n)
	}
	if !strings.Contains(string(trace), `"event_type":"session_end"`) || strings.Contains(string(trace), `"event_type":"chunk"`) {
		t.Errorf("trace:\n%s", trace)
	}
}

// sumCounter adds up every series of a counter vector.
func sumCounter(t *testing.T, c *prometheus.CounterVec) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		sum += pb.GetCounter().GetValue()
	}
	return sum
}

// TestHostedMetricsFromZero: hosting a capsule creates every trap and call series of its
// modules at zero; closing the last version carrying them deletes them; a second
// version of the same capsule keeps them alive while it lives.
func TestHostedMetricsFromZero(t *testing.T) {
	e, reg := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	series := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if n := mf.GetName(); n != "capsule_guest_traps_total" && n != "capsule_guest_calls_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				key := mf.GetName() + "{" + labels["capsule"] + "," + labels["artifact"] + "," + labels["role"] + "," + labels["reason"] + labels["status"] + "}"
				out[key] = m.GetCounter().GetValue()
			}
		}
		return out
	}
	trapReasons := []string{"deadline", "memory_limit", "trap", "exit", "abi"}
	callStatuses := append([]string{"ok", "canceled"}, trapReasons...)
	first := hostGatewayCapsule(t, e)
	got := series()
	for _, mod := range [][2]string{{"gatetool", "tool"}, {"hosted", "capsule"}} {
		for _, r := range trapReasons {
			if v, ok := got["capsule_guest_traps_total{hosted,"+mod[0]+","+mod[1]+","+r+"}"]; !ok || v != 0 {
				t.Errorf("trap series %v/%s: present %v value %v", mod, r, ok, v)
			}
		}
		for _, st := range callStatuses {
			if _, ok := got["capsule_guest_calls_total{hosted,"+mod[0]+","+mod[1]+","+st+"}"]; !ok {
				t.Errorf("call series %v/%s missing", mod, st)
			}
		}
	}
	if want := 2 * (len(trapReasons) + len(callStatuses)); len(got) != want {
		t.Errorf("%d series, want %d: %v", len(got), want, got)
	}
	second := hostGatewayCapsule(t, e) // a reload's new version, same labels
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(series()); n != 2*(len(trapReasons)+len(callStatuses)) {
		t.Errorf("closing the old version while the new one lives left %d series", n)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if left := series(); len(left) != 0 {
		t.Errorf("series after the last version closed: %v", left)
	}
}
