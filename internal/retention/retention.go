// Package retention deletes expired history so that the cost of a kici
// installation does not grow forever: finished runs (with their jobs,
// steps and queue entries), processed deliveries and the event log, the
// access log, provenance attestations, decided holds, terminal dispatch
// queue entries and step logs, each after its KiCI retention variable
// (see docs/kici-compatibility.md#retention-and-observability). One node sweeps at a time (the "retention" lease),
// in bounded batches with a pause between them, so ingest and dispatch
// never wait behind a sweep; what was swept is counted in
// kici_orch_retention_swept_total{kind}.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/store"
)

// LeaseName is the lease a node holds while it is the sweeper.
const LeaseName = "retention"

// Defaults of a Config (KiCI's).
const (
	DefaultRunDays        = 90
	DefaultAuditDays      = 365
	DefaultProvenanceDays = 365
	DefaultHeldRunDays    = 90
	DefaultQueueDays      = 30
	DefaultStepLogDays    = 90
	// DefaultInterval is the time between two sweeps.
	DefaultInterval = time.Hour
	// DefaultPause is the pause between two batches of a sweep.
	DefaultPause = 50 * time.Millisecond
)

// Config is how long each kind of history is kept. A zero duration keeps
// that kind forever.
type Config struct {
	// Runs: KICI_RUN_RETENTION_DAYS (90), finished runs and, with them,
	// deliveries and the event log of the same age.
	Runs time.Duration
	// Audit: KICI_AUDIT_RETENTION_DAYS (365), the access log.
	Audit time.Duration
	// Provenance: KICI_PROVENANCE_RETENTION_DAYS (365), attestation
	// bundles; a run holding a retained attestation is kept with it.
	Provenance time.Duration
	// HeldRuns: KICI_HELD_RUN_RETENTION_DAYS (90), decided or expired holds.
	HeldRuns time.Duration
	// Queue: KICI_DISPATCH_QUEUE_TTL_DAYS (30), terminal queue entries.
	Queue time.Duration
	// StepLogs: KICI_STEP_LOG_TTL_DAYS (90), step log files.
	StepLogs time.Duration
	// AgentLogs: KICI_AGENT_LOG_TTL_DAYS (14), spawned agents' output
	// files in AgentLogDir, swept by every node (they are local files).
	AgentLogs time.Duration
	// AgentLogDir is where spawned agents' output files are
	// (<KICI_DATA_DIR>/agents); "" sweeps none.
	AgentLogDir string
	// Interval between sweeps (DefaultInterval when zero).
	Interval time.Duration
	// Batch is the number of rows one statement deletes
	// (store.DefaultSweepBatch when zero).
	Batch int
	// Pause between batches (DefaultPause when zero).
	Pause time.Duration
}

// Variables lists the environment variables LoadConfig reads, with their
// defaults in days.
var Variables = []struct {
	Name    string
	Default int
}{
	{"KICI_RUN_RETENTION_DAYS", DefaultRunDays},
	{"KICI_AUDIT_RETENTION_DAYS", DefaultAuditDays},
	{"KICI_PROVENANCE_RETENTION_DAYS", DefaultProvenanceDays},
	{"KICI_HELD_RUN_RETENTION_DAYS", DefaultHeldRunDays},
	{"KICI_DISPATCH_QUEUE_TTL_DAYS", DefaultQueueDays},
	{"KICI_STEP_LOG_TTL_DAYS", DefaultStepLogDays},
	{"KICI_AGENT_LOG_TTL_DAYS", DefaultAgentLogDays},
}

// LoadConfig reads the retention variables from environ: each a whole
// number of days ≥ 0 (0 = keep forever). A malformed value is an error
// naming the variable.
func LoadConfig(environ []string) (Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	days := make([]time.Duration, len(Variables))
	for i, v := range Variables {
		n := v.Default
		if raw, ok := env[v.Name]; ok && strings.TrimSpace(raw) != "" {
			parsed, err := strconv.Atoi(strings.TrimSpace(raw))
			if err != nil || parsed < 0 || parsed > 36500 {
				return Config{}, fmt.Errorf("%s=%q: want a whole number of days from 0 (keep forever) to 36500", v.Name, raw)
			}
			n = parsed
		}
		days[i] = time.Duration(n) * 24 * time.Hour
	}
	return Config{Runs: days[0], Audit: days[1], Provenance: days[2], HeldRuns: days[3], Queue: days[4], StepLogs: days[5], AgentLogs: days[6]}, nil
}

// Logs is the part of the log store the sweeper uses (logstore.FS).
type Logs interface {
	// RemoveRun deletes every log of a run.
	RemoveRun(runID string) error
	// SweepOlderThan deletes the logs of runs last written before cutoff,
	// at most limit runs, and returns their ids.
	SweepOlderThan(cutoff time.Time, limit int) ([]string, error)
}

// Sweeper runs the sweeps. Create it with New.
type Sweeper struct {
	st     store.Store
	logs   Logs
	cfg    Config
	holder string
	log    *slog.Logger
	swept  *prometheus.CounterVec
	now    func() time.Time
}

// New returns a sweeper over st and logs (logs may be nil: no log files),
// holding the lease as holder, counting into reg (may be nil).
func New(cfg Config, st store.Store, logs Logs, holder string, reg prometheus.Registerer, logger *slog.Logger) *Sweeper {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = store.DefaultSweepBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	s := &Sweeper{st: st, logs: logs, cfg: cfg, holder: holder, log: logger, now: time.Now,
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kici_orch_retention_swept_total",
			Help: "Rows (or run log directories, kind step_logs) deleted by the retention sweeps, by kind."}, []string{"kind"})}
	for _, k := range []string{store.SweepRuns, store.SweepDeliveries, store.SweepAudit, store.SweepProvenance,
		store.SweepHeldRuns, store.SweepQueue, "step_logs", AgentLogKind} {
		s.swept.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(s.swept)
	}
	return s
}

// Run sweeps every Interval while ctx lives: the database and step logs on
// the node that holds the lease, this node's own agent output files on
// every node; the first sweep is a minute after start, off the startup
// path.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sweepLocal()
		ok, err := s.st.AcquireLease(ctx, LeaseName, s.holder, 3*s.cfg.Interval)
		switch {
		case err != nil:
			s.log.Warn("retention: lease", "err", err)
		case ok:
			if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("retention: sweep", "err", err)
			}
		}
		t.Reset(s.cfg.Interval)
	}
}

// SweepOnce runs every enabled sweep to completion (batch after batch) and
// returns what it deleted by kind. It stops at the first store error.
func (s *Sweeper) SweepOnce(ctx context.Context) (map[string]int, error) {
	now := s.now()
	out := map[string]int{}
	keepAttested := time.Time{}
	if s.cfg.Provenance > 0 {
		keepAttested = now.Add(-s.cfg.Provenance)
	}
	// Runs go first: their attestations, jobs and queue entries go with
	// them; the later kinds then find less to do.
	kinds := []struct {
		kind string
		keep time.Duration
	}{
		{store.SweepRuns, s.cfg.Runs}, {store.SweepDeliveries, s.cfg.Runs}, {store.SweepAudit, s.cfg.Audit},
		{store.SweepProvenance, s.cfg.Provenance}, {store.SweepHeldRuns, s.cfg.HeldRuns}, {store.SweepQueue, s.cfg.Queue},
	}
	for _, k := range kinds {
		if k.keep <= 0 {
			continue
		}
		for {
			n, runIDs, err := s.st.SweepExpired(ctx, k.kind, now.Add(-k.keep), keepAttested, s.cfg.Batch)
			if err != nil {
				return out, fmt.Errorf("%s: %w", k.kind, err)
			}
			out[k.kind] += n
			s.swept.WithLabelValues(k.kind).Add(float64(n))
			for _, id := range runIDs {
				if s.logs != nil {
					if err := s.logs.RemoveRun(id); err != nil {
						s.log.Warn("retention: remove run logs", "runId", id, "err", err)
					}
				}
			}
			if n < s.cfg.Batch {
				break
			}
			if err := s.pause(ctx); err != nil {
				return out, err
			}
		}
	}
	if s.cfg.StepLogs > 0 && s.logs != nil {
		for {
			ids, err := s.logs.SweepOlderThan(now.Add(-s.cfg.StepLogs), s.cfg.Batch)
			out["step_logs"] += len(ids)
			s.swept.WithLabelValues("step_logs").Add(float64(len(ids)))
			if err != nil {
				return out, fmt.Errorf("step logs: %w", err)
			}
			if len(ids) < s.cfg.Batch {
				break
			}
			if err := s.pause(ctx); err != nil {
				return out, err
			}
		}
	}
	if total := sum(out); total > 0 {
		s.log.Info("retention: swept", "runs", out[store.SweepRuns], "deliveries", out[store.SweepDeliveries],
			"audit", out[store.SweepAudit], "provenance", out[store.SweepProvenance], "heldRuns", out[store.SweepHeldRuns],
			"queue", out[store.SweepQueue], "stepLogs", out["step_logs"])
	}
	return out, nil
}

func (s *Sweeper) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.cfg.Pause):
		return nil
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
