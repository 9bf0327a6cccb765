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
	}
}

// register adds the collectors to reg (nil: nothing); one already there is adopted, as
// wasm.Metrics.Register does.
func (m *Metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := errors.Join(promreg.Into(reg, &m.Stage), promreg.Into(reg, &m.Inference), promreg.Into(reg, &m.ArtifactCalls),
		promreg.Into(reg, &m.ArtifactPulls)); err != nil {
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
