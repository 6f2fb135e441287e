// Package servermetrics holds the orchestrator's own Prometheus metrics
// (the scaler's are the scaler's): HTTP requests, deliveries, finished runs
// and jobs (a runs.Subscriber), dispatch latency, the dispatch queue at
// scrape time and the step log lines agents send (a counting log sink in
// front of the step-log store).
package servermetrics

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// Metrics are the orchestrator's own Prometheus metrics, beside the
// scaler's (internal/scaler). Names follow KiCI where KiCI names the
// figure (kici_orch_agents_active, kici_orch_dispatch_queue_depth,
// kici_orch_dispatch_queue_depth_by_label, kici_orch_webhooks_processed_total,
// kici_orch_executions_total, kici_orch_job_duration_seconds) and the
// Prometheus conventions otherwise: counters end in _total, durations are
// seconds, sizes bytes.
type Metrics struct {
	runs.NopSubscriber // counts finished runs and jobs (RunFinished, JobFinished)

	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	webhookAccept *prometheus.HistogramVec
	deliveries    *prometheus.CounterVec
	runsCreated   prometheus.Counter
	executions    *prometheus.CounterVec
	execDuration  *prometheus.HistogramVec
	jobs          *prometheus.CounterVec
	jobDuration   *prometheus.HistogramVec
	dispatchLat   prometheus.Histogram
	logLines      *prometheus.CounterVec
	logBytes      *prometheus.CounterVec
}

// latencyBuckets span 1 ms to 60 s, for request and dispatch latencies.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .04, .08, .16, .32, .64, 1.28, 2.56, 5, 10, 30, 60}

// durationBuckets span 1 s to 6 h, for runs and jobs.
var durationBuckets = prometheus.ExponentialBuckets(1, 2.5, 12)

// New creates the metrics and registers them, with the Go runtime and
// process collectors, on reg; it panics if a name is taken (twice on one
// registry).
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code."}, []string{"route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kici_orch_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by route pattern.", Buckets: latencyBuckets}, []string{"route"}),
		webhookAccept: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kici_orch_webhook_accept_duration_seconds",
			Help:    "Time from a webhook request's arrival to its answer (verification and the durable write included), by status code.",
			Buckets: latencyBuckets}, []string{"code"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_webhooks_processed_total",
			Help: "Deliveries turned into runs (or into none), by outcome: processed or failed."}, []string{"status"}),
		runsCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "kici_orch_runs_created_total",
			Help: "Runs created from deliveries."}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_executions_total",
			Help: "Runs that reached a terminal status, by status."}, []string{"status"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kici_orch_execution_duration_seconds",
			Help: "Run duration from creation to its terminal status, by status.", Buckets: durationBuckets}, []string{"status"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_jobs_finished_total",
			Help: "Jobs that reached a terminal status, by status."}, []string{"status"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kici_orch_job_duration_seconds",
			Help: "Job duration from its start on an agent to its terminal status, by status.", Buckets: durationBuckets}, []string{"status"}),
		dispatchLat: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kici_orch_dispatch_latency_seconds",
			Help: "Time from a job entering the dispatch queue (ready) to its agent's acknowledgement.", Buckets: latencyBuckets}),
		logLines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_log_lines_total",
			Help: "Step log lines received from agents, by result: stored; dropped because the log store refused them (must stay 0); capped (past KICI_STEP_LOG_MAX_BYTES); late (the step's log was already archived)."}, []string{"result"}),
		logBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_log_bytes_total",
			Help: "Bytes of step log text received from agents, by result: stored or dropped."}, []string{"result"}),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.webhookAccept, m.deliveries, m.runsCreated, m.executions, m.execDuration,
		m.jobs, m.jobDuration, m.dispatchLat, m.logLines, m.logBytes)
	// Both results exist from the start, so "dropped" reads 0, not absent.
	for _, r := range []string{"stored", "dropped"} {
		m.logLines.WithLabelValues(r)
		m.logBytes.WithLabelValues(r)
	}
	return m
}

// DeliveryFinished counts one finished delivery by status ("processed" or
// "failed") and the runs it created (ingest.ProcessorDeps.Outcome).
func (m *Metrics) DeliveryFinished(status string, runs int) {
	m.deliveries.WithLabelValues(status).Inc()
	m.runsCreated.Add(float64(runs))
}

// DispatchAcked observes how long a job waited from ready to its agent's
// acknowledgement (dispatch.Deps.AckObserver).
func (m *Metrics) DispatchAcked(_ []string, wait time.Duration) {
	m.dispatchLat.Observe(wait.Seconds())
}

var _ runs.Subscriber = (*Metrics)(nil)

// RunFinished counts a finished run and its duration by status
// (runs.Subscriber).
func (m *Metrics) RunFinished(r *store.Run) {
	m.executions.WithLabelValues(string(r.Status)).Inc()
	if r.CompletedAt != nil {
		m.execDuration.WithLabelValues(string(r.Status)).Observe(r.CompletedAt.Sub(r.CreatedAt).Seconds())
	}
}

// JobFinished counts a finished job and its duration from its start by
// status (runs.Subscriber).
func (m *Metrics) JobFinished(j *store.Job) {
	m.jobs.WithLabelValues(string(j.Status)).Inc()
	if j.StartedAt != nil {
		m.jobDuration.WithLabelValues(string(j.Status)).Observe(time.Since(*j.StartedAt).Seconds())
	}
}

// Wire registers on reg the gauges read at scrape time: the agents
// connected to d and the dispatch queue in st.
func (m *Metrics) Wire(reg *prometheus.Registry, st store.Store, d *dispatch.Dispatcher) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kici_orch_agents_active",
		Help: "Agents connected and registered with this orchestrator."}, func() float64 { return float64(d.AgentCount()) }))
	reg.MustRegister(&queueCollector{st: st})
}

// Instrument wraps the router: every request is counted by its route
// pattern (never the raw path, which would make a series per id) and code,
// and webhook requests also feed the accept-latency histogram.
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			// The agent socket is hijacked, and its lifetime is not a
			// request latency.
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		took := time.Since(start).Seconds()
		code := strconv.Itoa(sw.code)
		m.httpRequests.WithLabelValues(route, code).Inc()
		m.httpDuration.WithLabelValues(route).Observe(took)
		if strings.HasPrefix(route, "POST /webhook") {
			m.webhookAccept.WithLabelValues(code).Observe(took)
		}
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

// WriteHeader records the code.
func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write marks the implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush,
// deadlines, the WebSocket hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush forwards to the underlying writer (log follow, SSE).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// CountLogs returns sink counting the log lines the dispatcher stores or
// fails to store (kici_orch_log_lines_total, kici_orch_log_bytes_total).
// It keeps the sink's idempotent AppendFrom (dispatch.LogSink), which
// is what makes the dispatcher negotiate acknowledged log delivery.
func (m *Metrics) CountLogs(sink dispatch.LogSink) dispatch.LogSink {
	return countedLogs{LogSink: sink, m: m}
}

// countedLogs is CountLogs's sink.
type countedLogs struct {
	dispatch.LogSink
	m *Metrics
}

var _ dispatch.LogSink = countedLogs{}

// AppendFrom stores agent-numbered lines; the lines an agent numbered but
// that never arrived count as dropped. A failed write drops nothing: the
// dispatcher does not acknowledge it and the agent sends the lines again.
func (c countedLogs) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error) {
	res, err := c.LogSink.AppendFrom(runID, jobID, stepIndex, offset, lines)
	n := 0
	for _, l := range lines[len(lines)-min(res.Stored, len(lines)):] { // duplicates are skipped from the front
		n += len(l.Text)
	}
	c.m.logLines.WithLabelValues("stored").Add(float64(res.Stored))
	c.m.logBytes.WithLabelValues("stored").Add(float64(n))
	c.m.logLines.WithLabelValues("dropped").Add(float64(res.Missing))
	c.m.logLines.WithLabelValues("capped").Add(float64(res.Capped))
	c.m.logLines.WithLabelValues("late").Add(float64(res.Late))
	return res, err
}

// Append stores lines and counts them as stored or dropped.
func (c countedLogs) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	err := c.LogSink.Append(runID, jobID, stepIndex, lines)
	result := "stored"
	if err != nil {
		result = "dropped"
	}
	n := 0
	for i := range lines {
		n += len(lines[i].Text)
	}
	c.m.logLines.WithLabelValues(result).Add(float64(len(lines)))
	c.m.logBytes.WithLabelValues(result).Add(float64(n))
	return err
}

// queueCollector reports the dispatch queue at scrape time: pending jobs
// and the age of the oldest, in total and by runsOn label set. It reads
// the queue once per scrape, outside every dispatch lock.
type queueCollector struct{ st store.Store }

var (
	queueDepthDesc = prometheus.NewDesc("kici_orch_dispatch_queue_depth",
		"Jobs waiting in the dispatch queue.", nil, nil)
	queueByLabelDesc = prometheus.NewDesc("kici_orch_dispatch_queue_depth_by_label",
		"Jobs waiting in the dispatch queue, by runsOn label set (sorted, comma-separated; \"\" = any agent).", []string{"labels"}, nil)
	queueAgeDesc = prometheus.NewDesc("kici_orch_dispatch_queue_oldest_age_seconds",
		"Age of the oldest job waiting in the dispatch queue, by runsOn label set.", []string{"labels"}, nil)
)

// Describe sends the queue metrics' descriptors.
func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueByLabelDesc
	ch <- queueAgeDesc
}

// Collect reads the pending queue and reports it; a store error reports
// nothing (the scrape shows the gap) rather than a wrong zero.
func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := q.st.ListQueue(ctx, []string{store.QueuePending})
	if err != nil {
		return
	}
	type agg struct {
		n      int
		oldest time.Time
	}
	by := map[string]*agg{}
	for _, e := range list {
		labels := slices.Clone(e.RunsOnLabels)
		slices.Sort(labels)
		k := strings.Join(labels, ",")
		a := by[k]
		if a == nil {
			a = &agg{oldest: e.CreatedAt}
			by[k] = a
		}
		a.n++
		if e.CreatedAt.Before(a.oldest) {
			a.oldest = e.CreatedAt
		}
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(len(list)))
	for k, a := range by {
		ch <- prometheus.MustNewConstMetric(queueByLabelDesc, prometheus.GaugeValue, float64(a.n), k)
		ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, time.Since(a.oldest).Seconds(), k)
	}
}
