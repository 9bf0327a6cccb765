package runtime

import (
	"errors"

	"github.com/capsulegate/capsulegate/runtime/wasm"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/promreg"
)

// Metrics are the session collectors (docs/operators.md "Metrics and alerts"); the guest
// collectors are the engine's (wasm.Metrics).
type Metrics struct {
	Stage *prometheus.HistogramVec
	// Inference counts driver turns by the stop reason the model gave ("error" when the
	// turn failed).
	Inference *prometheus.CounterVec
	// ArtifactCalls counts the artifact manager's calls by operation and outcome (ok,
	// refused, error); ArtifactPulls its pulls by outcome (pulled, refused, error).
	ArtifactCalls *prometheus.CounterVec
	ArtifactPulls *prometheus.CounterVec
	// Receipts are the figures of every task's receipt, one observation per task
	// (docs/reference/metrics.md "Task receipts").
	Receipts Receipts
}

// Receipts are the task receipt histograms, per capsule.
type Receipts struct {
	Wall, Guest, PeakMemory, Denials, Traps *prometheus.HistogramVec
	Tokens                                  *prometheus.HistogramVec // model, direction (input, output)
	ToolCalls                               *prometheus.HistogramVec // kind
	NetworkBytes                            *prometheus.HistogramVec // direction (sent, received)
}

func newReceipts() Receipts {
	h := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, append([]string{"capsule"}, labels...))
	}
	counts := []float64{0, 1, 2, 5, 10, 20, 50, 100, 500}
	return Receipts{
		Wall: h("capsule_task_wall_seconds", "Receipts: each task's time from task_start to task_end.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}),
		Guest: h("capsule_task_guest_seconds", "Receipts: each task's time inside guest calls.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}),
		PeakMemory: h("capsule_task_peak_guest_memory_bytes", "Receipts: the largest guest linear memory each task's calls reached.",
			prometheus.ExponentialBuckets(64<<10, 4, 9)),
		Tokens: h("capsule_task_tokens", "Receipts: model tokens per task, by model and direction (input, output); observed for each model a task used.",
			prometheus.ExponentialBuckets(10, 10, 7), "model", "direction"),
		ToolCalls: h("capsule_task_tool_calls", "Receipts: tool calls per task, by kind; observed for each kind a task called.",
			counts, "kind"),
		NetworkBytes: h("capsule_task_network_bytes", "Receipts: bytes each task exchanged through the policy dialers and proxy, by direction (sent, received).",
			prometheus.ExponentialBuckets(1<<10, 8, 8), "direction"),
		Denials: h("capsule_task_network_denials", "Receipts: network-policy refusals per task.", counts),
		Traps:   h("capsule_task_traps", "Receipts: failed guest calls per task, every reason together.", counts),
	}
}

// observe records one task's receipt.
func (r Receipts) observe(capsule string, rc Receipt) {
	r.Wall.WithLabelValues(capsule).Observe(rc.WallSeconds)
	r.Guest.WithLabelValues(capsule).Observe(rc.GuestSeconds)
	r.PeakMemory.WithLabelValues(capsule).Observe(float64(rc.PeakGuestMemoryBytes))
	for _, t := range rc.Tokens {
		r.Tokens.WithLabelValues(capsule, t.Model, "input").Observe(float64(t.Input))
		r.Tokens.WithLabelValues(capsule, t.Model, "output").Observe(float64(t.Output))
	}
	for kind, n := range rc.ToolCalls {
		r.ToolCalls.WithLabelValues(capsule, kind).Observe(float64(n))
	}
	r.NetworkBytes.WithLabelValues(capsule, "sent").Observe(float64(rc.NetworkBytesSent))
	r.NetworkBytes.WithLabelValues(capsule, "received").Observe(float64(rc.NetworkBytesReceived))
	r.Denials.WithLabelValues(capsule).Observe(float64(rc.NetworkDenials))
	traps := 0
	for _, n := range rc.Traps {
		traps += n
	}
	r.Traps.WithLabelValues(capsule).Observe(float64(traps))
}

// register adds the histograms to reg, adopting one already there.
func (r *Receipts) register(reg prometheus.Registerer) error {
	return errors.Join(promreg.Into(reg, &r.Wall), promreg.Into(reg, &r.Guest), promreg.Into(reg, &r.PeakMemory), promreg.Into(reg, &r.Tokens),
		promreg.Into(reg, &r.ToolCalls), promreg.Into(reg, &r.NetworkBytes), promreg.Into(reg, &r.Denials), promreg.Into(reg, &r.Traps))
}

func newMetrics() *Metrics {
	return &Metrics{
		Stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capsule_stage_duration_seconds",
			Help:    "Time to stage a capsule: resolve, verify and compile its artifacts.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"capsule"}),
		Inference: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_inference_requests_total",
			Help: "Driver turns of agent capsules, by stop reason.",
		}, []string{"capsule", "stop_reason"}),
		ArtifactCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_artifact_manager_calls_total",
			Help: "Calls of a capsule's artifact manager (murmur:artifact-manager/manage and the model's artifact tools), by operation and outcome.",
		}, []string{"capsule", "op", "status"}),
		ArtifactPulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_artifact_pulls_total",
			Help: "Runtime pulls of a capsule's artifact manager, by outcome: pulled, refused (not granted, untrusted, failed its digest check) or error.",
		}, []string{"capsule", "result"}),
		Receipts: newReceipts(),
	}
}

// register adds the collectors to reg (nil: nothing); one already there is adopted, as
// wasm.Metrics.Register does.
func (m *Metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := errors.Join(promreg.Into(reg, &m.Stage), promreg.Into(reg, &m.Inference), promreg.Into(reg, &m.ArtifactCalls),
		promreg.Into(reg, &m.ArtifactPulls), m.Receipts.register(reg)); err != nil {
		return errs.Wrap(err, wasm.CodeMetrics, "runtime", "cannot register the session metrics", "remove the conflicting collector from the registry")
	}
	return nil
}

// metricsSink counts a session's events on the Prometheus collectors: one sink of the
// stream like any other, so the loop never touches a counter.
type metricsSink struct {
	m       *Metrics
	capsule string
}

// knownStops bounds the stop_reason label: anything a driver invents is "other".
var knownStops = map[string]bool{"end_turn": true, "tool_call": true, "max_tokens": true, "error": true}

func (s metricsSink) Event(e *Event) error {
	if rc, ok := e.Data.(Receipt); ok && e.Type == EventReceipt {
		s.m.Receipts.observe(s.capsule, rc)
	}
	if inf, ok := e.Data.(Inference); ok && e.Type == EventInference {
		stop := inf.StopReason
		if !knownStops[stop] {
			stop = "other"
		}
		s.m.Inference.WithLabelValues(s.capsule, stop).Inc()
	}
	if c, ok := e.Data.(ArtifactCall); ok && e.Type == EventArtifact {
		s.m.ArtifactCalls.WithLabelValues(s.capsule, c.Op, c.Status).Inc()
		if c.Op == "pull" {
			result := c.Status
			if result == "ok" {
				result = "pulled"
			}
			s.m.ArtifactPulls.WithLabelValues(s.capsule, result).Inc()
		}
	}
	return nil
}
