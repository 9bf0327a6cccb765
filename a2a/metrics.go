package a2a

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/promreg"
)

// Metrics are the task collectors (docs/reference/metrics.md "Tasks"). Labels carry only
// the capsule name and the task state, never ids.
type Metrics struct {
	// Tasks counts tasks that reached a terminal state: completed, failed, canceled,
	// rejected.
	Tasks *prometheus.CounterVec
	// InFlight is 1 while a task holds the capsule's slot (running or waiting for input).
	InFlight *prometheus.GaugeVec
	// QueueDepth is the number of admitted tasks waiting for the slot.
	QueueDepth *prometheus.GaugeVec
	// Interrupted counts tasks a durable store found unfinished when the gateway started
	// and ended failed ("interrupted").
	Interrupted *prometheus.CounterVec
	// PushFailures counts push notifications dropped after their last delivery attempt
	// (docs/reference/metrics.md "Tasks").
	PushFailures *prometheus.CounterVec
	// Claims, Failovers and Leases are a replica's part in a fleet of gateways: queued
	// tasks it claimed, orphans of stopped gateways it ended interrupted, and the contexts
	// it holds now (one running task each).
	Claims, Failovers *prometheus.CounterVec
	Leases            *prometheus.GaugeVec
	// AuthRefusals, PolicyDenials, LimitRefusals and Shed count the edge's refusals
	// (docs/reference/metrics.md "Edge"): credentials by code, the policy's denials,
	// each limit's refusals (rate, concurrency, tokens) and new tasks shed by reason
	// (queue, memory).
	AuthRefusals, PolicyDenials, LimitRefusals, Shed *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them on reg (nil: not registered).
// Collectors already registered there under the same names, as after a Caddy reload
// re-provisions, are reused rather than refused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_tasks_total",
			Help: "A2A tasks that reached a terminal state, by state.",
		}, []string{"capsule", "state"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capsule_tasks_in_flight",
			Help: "A2A tasks holding the capsule's slot (running or waiting for input).",
		}, []string{"capsule"}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capsule_task_queue_depth",
			Help: "A2A tasks admitted and waiting for the capsule's slot.",
		}, []string{"capsule"}),
		Interrupted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_tasks_interrupted_total",
			Help: "A2A tasks found unfinished in the task store at start and ended failed (interrupted).",
		}, []string{"capsule"}),
		PushFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_push_failures_total",
			Help: "A2A push notifications dropped after their last delivery attempt failed.",
		}, []string{"capsule"}),
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_fleet_claims_total",
			Help: "Queued A2A tasks this gateway claimed from the fleet's store to run.",
		}, []string{"capsule"}),
		Failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_fleet_failovers_total",
			Help: "A2A tasks of a gateway that stopped renewing its lease, ended failed (interrupted) by this one.",
		}, []string{"capsule"}),
		AuthRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_auth_refusals_total",
			Help: "A2A requests refused 401 for their credentials, by E-AUTH code (bearer: a token none of the route's).",
		}, []string{"capsule", "code"}),
		PolicyDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_policy_denials_total",
			Help: "A2A requests the route's policy refused (or could not decide).",
		}, []string{"capsule"}),
		LimitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_limit_refusals_total",
			Help: "A2A requests refused by a principal's limit: rate, concurrency or tokens.",
		}, []string{"capsule", "limit"}),
		Shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_shed_total",
			Help: "New A2A tasks refused 503 because the gateway was at its queue or memory bound.",
		}, []string{"capsule", "reason"}),
		Leases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capsule_fleet_leases",
			Help: "Contexts this gateway holds the lease of: one task of each runs here.",
		}, []string{"capsule"}),
	}
	if err := m.Register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// Register adds the collectors to reg (nil: nothing); a collector already registered
// there under one of our names is adopted, so counts survive a reload.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	err := errors.Join(promreg.Into(reg, &m.Tasks), promreg.Into(reg, &m.InFlight), promreg.Into(reg, &m.QueueDepth),
		promreg.Into(reg, &m.Interrupted), promreg.Into(reg, &m.PushFailures),
		promreg.Into(reg, &m.Claims), promreg.Into(reg, &m.Failovers), promreg.Into(reg, &m.Leases),
		promreg.Into(reg, &m.AuthRefusals), promreg.Into(reg, &m.PolicyDenials), promreg.Into(reg, &m.LimitRefusals), promreg.Into(reg, &m.Shed))
	if err != nil {
		return errs.Wrap(err, CodeMetrics, "a2a", "cannot register the task metrics", "remove the conflicting collector from the registry")
	}
	return nil
}

// ended counts a task that reached terminal state.
func (m *Metrics) ended(capsule, state string) {
	if m != nil {
		m.Tasks.WithLabelValues(capsule, state).Inc()
	}
}

// interrupted counts a task ended failed at restore because the gateway stopped under it.
func (m *Metrics) interrupted(capsule string) {
	if m != nil {
		m.Interrupted.WithLabelValues(capsule).Inc()
	}
}

// claimed counts a task this replica claimed from the fleet.
func (m *Metrics) claimed(capsule string) {
	if m != nil {
		m.Claims.WithLabelValues(capsule).Inc()
	}
}

// failover counts an orphan of a stopped gateway ended interrupted here.
func (m *Metrics) failover(capsule string) {
	if m != nil {
		m.Failovers.WithLabelValues(capsule).Inc()
	}
}

// fleetFrom0 shows a replica's fleet series from its start.
func (m *Metrics) fleetFrom0(capsule string) {
	if m != nil {
		m.Claims.WithLabelValues(capsule)
		m.Failovers.WithLabelValues(capsule)
		m.Leases.WithLabelValues(capsule)
	}
}

// slot records whether the capsule's slot is taken and how many tasks wait for it.
func (m *Metrics) slot(capsule string, inFlight, queued int) {
	if m == nil {
		return
	}
	m.InFlight.WithLabelValues(capsule).Set(float64(inFlight))
	m.QueueDepth.WithLabelValues(capsule).Set(float64(queued))
}

// pushFailed counts a push notification dropped after its last attempt.
func (m *Metrics) pushFailed(capsule string) {
	if m != nil {
		m.PushFailures.WithLabelValues(capsule).Inc()
	}
}

// pushFailuresFrom0 creates the capsule's push failure series at zero, so that a rate
// over it starts from the handler's start rather than from its first failure.
func (m *Metrics) pushFailuresFrom0(capsule string) {
	if m != nil {
		m.PushFailures.WithLabelValues(capsule)
	}
}

// authRefused counts a request refused for its credentials.
func (m *Metrics) authRefused(capsule, code string) {
	if m != nil {
		m.AuthRefusals.WithLabelValues(capsule, code).Inc()
	}
}

// policyDenied counts a request the policy refused.
func (m *Metrics) policyDenied(capsule string) {
	if m != nil {
		m.PolicyDenials.WithLabelValues(capsule).Inc()
	}
}

// limited counts a request a principal's limit refused.
func (m *Metrics) limited(capsule, limit string) {
	if m != nil {
		m.LimitRefusals.WithLabelValues(capsule, limit).Inc()
	}
}

// shed counts a new task refused for the gateway's load.
func (m *Metrics) shed(capsule, reason string) {
	if m != nil {
		m.Shed.WithLabelValues(capsule, reason).Inc()
	}
}

// edgeFrom0 shows the series of what cfg configures from zero, before any refusal.
func (m *Metrics) edgeFrom0(cfg Config) {
	if m == nil {
		return
	}
	m.EdgeFrom0(cfg.Card.Name, cfg.Policy != nil, cfg.Limits)
	if cfg.Shed != nil {
		m.Shed.WithLabelValues(cfg.Card.Name, "queue")
		m.Shed.WithLabelValues(cfg.Card.Name, "memory")
	}
}

// EdgeFrom0 shows a route's policy and limit series of capsule from zero, before any
// refusal (a host calls it for each route it serves with its own settings).
func (m *Metrics) EdgeFrom0(capsule string, policy bool, l Limits) {
	if m == nil {
		return
	}
	if policy {
		m.PolicyDenials.WithLabelValues(capsule)
	}
	for limit, on := range map[string]bool{"rate": l.Rate > 0, "concurrency": l.Concurrent > 0, "tokens": l.Tokens > 0} {
		if on {
			m.LimitRefusals.WithLabelValues(capsule, limit)
		}
	}
}
