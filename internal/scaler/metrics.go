package scaler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scaler's Prometheus series (KiCI 0.9.1's names where one
// exists; see docs/kici-compatibility.md#scaling). A nil *Metrics records nothing.
type Metrics struct {
	failures *prometheus.CounterVec
	refusals prometheus.Counter
	spawns   *prometheus.CounterVec
	spawnDur *prometheus.HistogramVec
	active   *prometheus.GaugeVec
	spawning *prometheus.GaugeVec
	reloads  *prometheus.CounterVec
	wpTarget *prometheus.GaugeVec
	wpReady  *prometheus.GaugeVec
	wpFlight *prometheus.GaugeVec
	wpSpawns *prometheus.CounterVec
	wpReaped *prometheus.CounterVec
}

// NewMetrics registers the scaler series on reg:
//
//	kici_orch_scaler_spawn_failures_total{backend,bound}   spawns that produced no agent
//	kici_orch_scaler_spawn_refusals_total                  jobs refused a spawn at a cap (once per job)
//	kici_orch_scaler_spawns_total{scaler,backend}          agents started
//	kici_orch_scaler_spawn_duration_seconds{scaler,backend} backend spawn latency
//	kici_orch_scaler_agents_active{scaler,backend}         reserved agents (queued, spawning, alive)
//	kici_orch_scaler_agents_spawning{scaler,backend}       backend spawn calls in flight
//	kici_orch_scaler_config_reloads_total{result}          SIGHUP reloads (success|failed)
//	kici_orch_scaler_warm_pool_target{scaler}              warm agents wanted (size × label sets)
//	kici_orch_scaler_warm_pool_ready{scaler}               warm agents registered and idle
//	kici_orch_scaler_warm_pool_in_flight{scaler}           warm agents starting
//	kici_orch_scaler_warm_pool_spawns_total{scaler}        warm agents spawned
//	kici_orch_scaler_warm_pool_reaped_total{scaler}        surplus warm agents destroyed
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_scaler_spawn_failures_total",
			Help: "Agent spawns that failed or hit the spawn deadline."}, []string{"backend", "bound"}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "kici_orch_scaler_spawn_refusals_total",
			Help: "Jobs refused a spawn because globalMaxAgents or a scaler's maxAgents was reached (each job once, however often it is retried)."}),
		spawns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_scaler_spawns_total",
			Help: "Agents started by the scaler."}, []string{"scaler", "backend"}),
		spawnDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kici_orch_scaler_spawn_duration_seconds",
			Help: "Duration of successful backend spawn calls.", Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}},
			[]string{"scaler", "backend"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kici_orch_scaler_agents_active",
			Help: "Agents reserved by each scaler: waiting for a spawn slot, spawning or alive."}, []string{"scaler", "backend"}),
		spawning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kici_orch_scaler_agents_spawning",
			Help: "Backend spawn calls in flight per scaler (bounded by maxConcurrentSpawns)."}, []string{"scaler", "backend"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_scaler_config_reloads_total",
			Help: "scalers.yaml reloads by result."}, []string{"result"}),
		wpTarget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kici_orch_scaler_warm_pool_target",
			Help: "Warm agents each scaler's pools want."}, []string{"scaler"}),
		wpReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kici_orch_scaler_warm_pool_ready",
			Help: "Warm agents registered and idle."}, []string{"scaler"}),
		wpFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kici_orch_scaler_warm_pool_in_flight",
			Help: "Warm agents starting (not registered yet)."}, []string{"scaler"}),
		wpSpawns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_scaler_warm_pool_spawns_total",
			Help: "Warm agents spawned."}, []string{"scaler"}),
		wpReaped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_scaler_warm_pool_reaped_total",
			Help: "Surplus idle warm agents destroyed."}, []string{"scaler"}),
	}
	reg.MustRegister(m.failures, m.refusals, m.spawns, m.spawnDur, m.active, m.spawning, m.reloads,
		m.wpTarget, m.wpReady, m.wpFlight, m.wpSpawns, m.wpReaped)
	return m
}

func (m *Metrics) refusal(*Entry) {
	if m != nil {
		m.refusals.Inc()
	}
}

func (m *Metrics) failure(e *Entry) {
	if m != nil {
		m.failures.WithLabelValues(string(e.Type), "true").Inc()
	}
}

func (m *Metrics) spawned(e *Entry, d time.Duration) {
	if m != nil {
		m.spawns.WithLabelValues(e.Name, string(e.Type)).Inc()
		m.spawnDur.WithLabelValues(e.Name, string(e.Type)).Observe(d.Seconds())
	}
}

func (m *Metrics) gauges(e *Entry, active, spawning int) {
	if m != nil {
		m.active.WithLabelValues(e.Name, string(e.Type)).Set(float64(active))
		m.spawning.WithLabelValues(e.Name, string(e.Type)).Set(float64(spawning))
	}
}

// Reload counts a reload attempt (result success or failed).
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("success").Inc()
	} else {
		m.reloads.WithLabelValues("failed").Inc()
	}
}

func (m *Metrics) warm(scaler string, target, ready, inFlight, spawned, reaped int) {
	if m == nil {
		return
	}
	m.wpTarget.WithLabelValues(scaler).Set(float64(target))
	m.wpReady.WithLabelValues(scaler).Set(float64(ready))
	m.wpFlight.WithLabelValues(scaler).Set(float64(inFlight))
	m.wpSpawns.WithLabelValues(scaler).Add(float64(spawned))
	m.wpReaped.WithLabelValues(scaler).Add(float64(reaped))
}
