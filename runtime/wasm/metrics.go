package wasm

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/promreg"
)

// Metrics are the guest collectors (docs/operators.md "Metrics and alerts"). Labels carry
// only bounded values: capsule and artifact names from manifests, roles, reasons and
// statuses.
type Metrics struct {
	mu   sync.Mutex
	live map[[3]string]int // (capsule, artifact, role) → staged modules carrying those labels

	Traps    *prometheus.CounterVec
	Calls    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	// Denied counts network-policy refusals, the guests' own (source "guest") and those
	// of the sessions' proxies and resolvers ("proxy", "dns").
	Denied *prometheus.CounterVec
	// WarmInstances and WarmBytes are the warm instances waiting for a call and the
	// linear memory they hold (reuse.go).
	WarmInstances prometheus.Gauge
	WarmBytes     prometheus.Gauge
}

// NewMetrics creates the collectors and registers them on reg (nil: not registered).
// A collector that is already registered — Caddy builds a new registry on each reload
// and registers the same collectors again — is reused, not an error.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Traps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_guest_traps_total",
			Help: "Guest calls that failed, by reason: deadline, memory_limit, trap, exit, abi.",
		}, []string{"capsule", "artifact", "role", "reason"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_guest_calls_total",
			Help: "Guest calls, by outcome status (ok or the failure reason).",
		}, []string{"capsule", "artifact", "role", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capsule_guest_call_duration_seconds",
			Help:    "Wall-clock duration of guest calls, instantiation included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600},
		}, []string{"capsule", "role"}),
		Denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capsule_network_denied_total",
			Help: "Connections refused by the network policy, by source: guest, proxy, dns.",
		}, []string{"capsule", "source"}),
		WarmInstances: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capsule_guest_warm_instances",
			Help: "Guest instances kept warm between calls, reset and waiting for their next call.",
		}),
		WarmBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capsule_guest_warm_memory_bytes",
			Help: "Linear memory of the warm guest instances: the address space they map, shared copy-on-write with their init snapshot until a call writes it.",
		}),
	}
	if err := m.Register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// Register adds the collectors to reg (nil: nothing). The gateway calls it again with
// the registry of each new Caddy config, so the counters survive a reload; a collector
// already registered there under our name is adopted, not an error.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	err := errors.Join(promreg.Into(reg, &m.Traps), promreg.Into(reg, &m.Calls), promreg.Into(reg, &m.Duration),
		promreg.Into(reg, &m.Denied), promreg.Into(reg, &m.WarmInstances), promreg.Into(reg, &m.WarmBytes))
	if err != nil {
		return errs.Wrap(err, CodeMetrics, "wasm", "cannot register the guest metrics", "remove the conflicting collector from the registry")
	}
	return nil
}

// trapReasons are every reason label of capsule_guest_traps_total; callStatuses every
// status of capsule_guest_calls_total.
var (
	trapReasons  = []string{ReasonDeadline, ReasonMemoryLimit, ReasonTrap, ReasonExit, ReasonABI}
	callStatuses = append([]string{"ok", ReasonCanceled}, trapReasons...)
)

// Staged creates the trap and call series of each module at zero, so that rate() and
// absent() see a staged artifact before its first call (docs/operators.md, "Metrics and
// alerts"); Unstaged deletes them again once no staged module carries their labels.
func (m *Metrics) Staged(mods []*Module) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		m.live = map[[3]string]int{}
	}
	for _, mod := range mods {
		key := [3]string{mod.Capsule, mod.Artifact, string(mod.Role)}
		if m.live[key]++; m.live[key] > 1 {
			continue
		}
		for _, r := range trapReasons {
			m.Traps.WithLabelValues(key[0], key[1], key[2], r)
		}
		for _, st := range callStatuses {
			m.Calls.WithLabelValues(key[0], key[1], key[2], st)
		}
	}
}

func (m *Metrics) Unstaged(mods []*Module) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mod := range mods {
		key := [3]string{mod.Capsule, mod.Artifact, string(mod.Role)}
		if m.live[key]--; m.live[key] > 0 {
			continue
		}
		delete(m.live, key)
		for _, r := range trapReasons {
			m.Traps.DeleteLabelValues(key[0], key[1], key[2], r)
		}
		for _, st := range callStatuses {
			m.Calls.DeleteLabelValues(key[0], key[1], key[2], st)
		}
	}
}

// observe counts one call; reason is "" for success.
func (m *Metrics) observe(mod *Module, reason string, d time.Duration) {
	role := string(mod.Role)
	status := "ok"
	if reason != "" {
		status = reason
	}
	if reason != "" && reason != ReasonCanceled {
		m.Traps.WithLabelValues(mod.Capsule, mod.Artifact, role, reason).Inc()
	}
	m.Calls.WithLabelValues(mod.Capsule, mod.Artifact, role, status).Inc()
	m.Duration.WithLabelValues(mod.Capsule, role).Observe(d.Seconds())
}

// warm counts n instances holding bytes of memory into (or, negative, out of) the pools.
func (m *Metrics) warm(n int, bytes int64) {
	m.WarmInstances.Add(float64(n))
	m.WarmBytes.Add(float64(bytes))
}
