package a2a

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(reg) // a Caddy reload provisions again on the same registry
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	if a.Tasks != b.Tasks || a.InFlight != b.InFlight || a.QueueDepth != b.QueueDepth {
		t.Fatal("the second Metrics does not reuse the registered collectors")
	}
	a.ended("hello", stateCompleted)
	if got := testutil.ToFloat64(b.Tasks.WithLabelValues("hello", stateCompleted)); got != 1 {
		t.Fatalf("count through the other Metrics: %v", got)
	}
	if _, err := NewMetrics(nil); err != nil {
		t.Fatalf("no registry: %v", err)
	}
}

func TestMetricsConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "capsule_tasks_total", Help: "someone else's"}))
	if _, err := NewMetrics(reg); err == nil || !strings.Contains(err.Error(), CodeMetrics) {
		t.Fatalf("conflicting collector: %v", err)
	}
}

func TestMetricsCountStates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocking()
	h, srv := newServer(t, Config{Executor: b, Metrics: m})
	if got := testutil.ToFloat64(m.InFlight.WithLabelValues("hello")); got != 0 {
		t.Errorf("in flight before any task: %v", got)
	}
	task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("x"), "configuration": map[string]any{"blocking": false}})))
	recv(t, b.started)
	if got := testutil.ToFloat64(m.InFlight.WithLabelValues("hello")); got != 1 {
		t.Errorf("in flight while running: %v", got)
	}
	ok(t, call(t, srv, "", "tasks/cancel", map[string]any{"id": task.ID}))
	recv(t, b.ctxDone)
	waitState(t, srv, task.ID, "canceled")
	if err := h.Update(Config{Card: testCard(), Executor: failingExec{}, Metrics: m}); err != nil {
		t.Fatal(err)
	}
	// Blocking sends return once the slot is free again (the canceled Execute returned).
	for {
		r := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("y")})))
		if r.Status.State == "failed" {
			break
		}
	}
	for state, want := range map[string]float64{"canceled": 1, "failed": 1, "completed": 0} {
		if got := testutil.ToFloat64(m.Tasks.WithLabelValues("hello", state)); got != want {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "capsule_tasks_total", "capsule_tasks_in_flight", "capsule_task_queue_depth"); err != nil || n < 4 {
		t.Errorf("gathered %d series: %v", n, err)
	}
}
