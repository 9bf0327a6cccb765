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
	}
}

// register adds the collectors to reg (nil: nothing); one already there is adopted, as
// wasm.Metrics.Register does.
func (m *Metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := errors.Join(promreg.Into(reg, &m.Stage), promreg.Into(reg, &m.Inference)); err != nil {
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
	if inf, ok := e.Data.(Inference); ok && e.Type == EventInference {
		stop := inf.StopReason
		if !knownStops[stop] {
			stop = "other"
		}
		s.m.Inference.WithLabelValues(s.capsule, stop).Inc()
	}
	return nil
}
