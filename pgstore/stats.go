package pgstore

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stats counts the store's round trips to the database since Open.
type stats struct {
	ops, roundTrips, errors, dropped atomic.Uint64
	backlog                          atomic.Int64
	latency                          latency
}

// latency is a fixed-bucket histogram of round-trip durations, kept by hand so the store
// counts from its start whether or not a registry ever collects it.
type latency struct {
	counts [15]atomic.Uint64 // one per bucket of latencyBuckets, then +Inf
	sumNs  atomic.Uint64
}

// latencyBuckets are the round trips' upper bounds in seconds: loopback commits take a
// fraction of a millisecond, a remote database's several, an outage the timeout.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func (st *stats) roundTrip(d time.Duration, err error) {
	st.roundTrips.Add(1)
	if err != nil {
		st.errors.Add(1)
	}
	sec := d.Seconds()
	i := 0
	for i < len(latencyBuckets) && sec > latencyBuckets[i] {
		i++
	}
	st.latency.counts[i].Add(1)
	st.latency.sumNs.Add(uint64(d))
}

// Stats are the store's counts since Open.
type Stats struct {
	Ops        uint64 // writes committed or failed
	RoundTrips uint64 // commits, reads and probes sent to the database
	Errors     uint64 // round trips that failed
	Backlog    int    // writes kept while the database is away, not written yet
	Dropped    uint64 // writes of the backlog dropped: past MaxBacklog, or refused by the database
}

// Stats returns the store's counts since Open.
func (s *Store) Stats() Stats {
	return Stats{Ops: s.stats.ops.Load(), RoundTrips: s.stats.roundTrips.Load(), Errors: s.stats.errors.Load(),
		Backlog: int(s.stats.backlog.Load()), Dropped: s.stats.dropped.Load()}
}

// collector is the store's metrics for Prometheus, read from its counts at each scrape.
type collector struct {
	s                                                                *Store
	roundTrips, errors, writes, seconds, up, conns, backlog, dropped *prometheus.Desc
}

// Collector returns the store's metrics (docs/reference/metrics.md "Task store"):
// capsule_store_round_trips_total, capsule_store_errors_total,
// capsule_store_writes_total, capsule_store_round_trip_seconds, capsule_store_up,
// capsule_store_connections, capsule_store_backlog and
// capsule_store_backlog_dropped_total, all present from the store's start.
func (s *Store) Collector() prometheus.Collector {
	l := prometheus.Labels{"store": "postgres"}
	return &collector{s: s,
		roundTrips: prometheus.NewDesc("capsule_store_round_trips_total", "Round trips to the task store's database: commits, reads and probes.", nil, l),
		errors:     prometheus.NewDesc("capsule_store_errors_total", "Round trips to the task store's database that failed.", nil, l),
		writes:     prometheus.NewDesc("capsule_store_writes_total", "Writes committed to the task store, or failed with their commit.", nil, l),
		seconds:    prometheus.NewDesc("capsule_store_round_trip_seconds", "How long round trips to the task store's database took.", nil, l),
		up:         prometheus.NewDesc("capsule_store_up", "1 while the task store's database answers, 0 while it cannot be reached.", nil, l),
		conns:      prometheus.NewDesc("capsule_store_connections", "Connections open to the task store's database, the lock holder's included.", nil, l),
		backlog:    prometheus.NewDesc("capsule_store_backlog", "Writes kept while the task store's database is away, written once it is back.", nil, l),
		dropped:    prometheus.NewDesc("capsule_store_backlog_dropped_total", "Kept writes dropped: the backlog outgrew its bound, or the database refused them.", nil, l),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.roundTrips, c.errors, c.writes, c.seconds, c.up, c.conns, c.backlog, c.dropped} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := &c.s.stats
	ch <- prometheus.MustNewConstMetric(c.roundTrips, prometheus.CounterValue, float64(st.roundTrips.Load()))
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.errors.Load()))
	ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(st.ops.Load()))
	buckets := make(map[float64]uint64, len(latencyBuckets))
	var n uint64
	for i, b := range latencyBuckets {
		n += st.latency.counts[i].Load()
		buckets[b] = n
	}
	n += st.latency.counts[len(latencyBuckets)].Load()
	ch <- prometheus.MustNewConstHistogram(c.seconds, n, time.Duration(st.latency.sumNs.Load()).Seconds(), buckets)
	up := 1.0
	if c.s.down.Load() != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(c.s.Connections()))
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(st.backlog.Load()))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.dropped.Load()))
}

// Connections counts the connections the store holds open now: the pool's and the lock
// holder's.
func (s *Store) Connections() int {
	n := int(s.pool.Stat().TotalConns())
	s.lockMu.Lock()
	if s.lock != nil && !s.lock.IsClosed() {
		n++
	}
	s.lockMu.Unlock()
	if f := s.fleet; f != nil {
		// The sessions a replica holds beside the pool: signals, and the leader's lock.
		if f.listening.Load() {
			n++
		}
		if f.leader.Load() {
			n++
		}
	}
	return n
}
