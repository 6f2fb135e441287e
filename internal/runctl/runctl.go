// Package runctl makes runs always end right
// (see docs/kici-compatibility.md#runs-and-statuses): it cancels runs (graceful or forced,
// KiCI cancelRunWithReason), holds orchestrator drain mode (
// admin-orchestrator-drain), and runs the orchestrator-side sweeper that
// ends what no agent will end any more:
//
//   - stale jobs: a running job whose last job heartbeat is older than the
//     stale threshold becomes timed_out_stale ("no heartbeat for Ns"); a job
//     being cancelled becomes cancelled ("cancel not confirmed: …");
//   - job deadlines: a running job past its `timeout` plus a grace (during
//     which the agent's own deadline should have fired) fails with
//     "job_timeout: …";
//   - run deadlines: a run past its workflow `timeout` is cancelled
//     ("workflow_timeout: …"); if its jobs are still not terminal a grace
//     later, they fail;
//   - queue timeout: a job queued longer than the queue timeout becomes
//     timed_out_stale with its pending reason as the error (swept every
//     minute rather than KiCI's hour, as a finer sweep).
//
// Every decision is taken from the database at each pass, so deadlines
// survive an orchestrator restart without any re-arming step, and every
// write is a conditional transition, so racing an agent's own report is
// harmless: whichever lands first wins and the other changes nothing.
package runctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// Errors of CancelRun.
var (
	// ErrRunNotFound: no run has that id.
	ErrRunNotFound = errors.New("run not found")
	// ErrRunTerminal: the run already ended (success, failed, cancelled).
	ErrRunTerminal = errors.New("run already finished")
)

// Dispatcher is the part of dispatch.Dispatcher the controller drives.
type Dispatcher interface {
	// CancelJob sends job.cancel to the job's connected agent; false when
	// no connected agent owns the job.
	CancelJob(jobID, reason string, force bool) bool
	// AbortJob force-cancels the job on its agent if connected, frees the
	// slot and fails the queue entry.
	AbortJob(ctx context.Context, jobID, reason string) bool
	// ExpireQueued moves a pending queue entry to expired.
	ExpireQueued(ctx context.Context, jobID string) (bool, error)
	// SetDraining turns drain mode on or off.
	SetDraining(on bool)
	// Draining reports drain mode.
	Draining() bool
	// JobsRunning counts jobs on agents.
	JobsRunning() int
}

// Tracker is the part of runs.Tracker the controller drives.
type Tracker interface {
	// CancelJobs cancels a run's unstarted jobs and returns its running ones.
	CancelJobs(ctx context.Context, runID, reason string) (*runs.CancelResult, error)
	// JobFinished moves a job to a terminal status.
	JobFinished(ctx context.Context, jobID string, final status.Job, errMsg string, at time.Time) error
	// Reevaluate releases the ready jobs of a run admitted to its group.
	Reevaluate(ctx context.Context, runID string) error
}

// Defaults of Config.
const (
	// DefaultQueueTimeout is KICI_QUEUE_TIMEOUT_MS's default (1 h, as in KiCI).
	DefaultQueueTimeout = time.Hour
	// DefaultQueueSweepInterval is how often expired queue entries are
	// looked for (KiCI sweeps hourly; kici every minute).
	DefaultQueueSweepInterval = time.Minute
	// DefaultScanInterval is the stale/deadline scan period
	// (KICI_STALE_DETECTOR_SCAN_INTERVAL_MS, KiCI 60 s).
	DefaultScanInterval = time.Minute
	// DefaultStaleThreshold is 2 × the 60 s job heartbeat interval.
	DefaultStaleThreshold = 2 * time.Minute
	// DefaultDeadlineGrace is how long past a job's own timeout the
	// orchestrator waits for the agent before failing the job itself: the
	// agent's 30 s maximum cancel grace plus a margin.
	DefaultDeadlineGrace = time.Minute
)

// Config tunes the controller; zero fields take the defaults above.
type Config struct {
	// QueueTimeout ends jobs queued longer than this (negative: never).
	QueueTimeout time.Duration
	// QueueTimeoutFunc, when set, returns the queue timeout live, read on
	// every sweep pass (the cluster setting queue_timeout_ms, KiCI); 0
	// means never, a negative value means QueueTimeout.
	QueueTimeoutFunc func(ctx context.Context) time.Duration
	// QueueSweepInterval is the queue-timeout sweep period.
	QueueSweepInterval time.Duration
	// ScanInterval is the stale-job and deadline scan period.
	ScanInterval time.Duration
	// StaleThreshold is the job heartbeat silence after which a running job
	// is timed_out_stale.
	StaleThreshold time.Duration
	// DeadlineGrace is added to job and run timeouts before the
	// orchestrator ends jobs itself.
	DeadlineGrace time.Duration
	// UnroutableGrace fails a queued job that has been unroutable this
	// long (SweepUnroutable); ≤ 0 = never.
	UnroutableGrace time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.QueueTimeout, DefaultQueueTimeout)
	def(&c.QueueSweepInterval, DefaultQueueSweepInterval)
	def(&c.ScanInterval, DefaultScanInterval)
	def(&c.StaleThreshold, DefaultStaleThreshold)
	def(&c.DeadlineGrace, DefaultDeadlineGrace)
	return c
}

// Controller cancels runs, holds drain mode and sweeps; see the package
// documentation. It is safe for concurrent use.
type Controller struct {
	runs.NopSubscriber // admits runs and is told of finished ones (concurrency.go)

	cfg Config
	st  store.Store
	dsp Dispatcher
	tr  Tracker
	log *slog.Logger
	now func() time.Time

	sweepMu sync.Mutex
	// unroutableSince is when each queued job was first seen unroutable
	// (SweepUnroutable; guarded by sweepMu).
	unroutableSince map[string]time.Time
	groupMu         sync.Mutex // concurrency group decisions (concurrency.go)
	// ungrouped holds the runs EnterGroup was told have no concurrency
	// group, so that admitting them and releasing their slot read nothing
	// (concurrency.go); guarded by ungroupedMu.
	ungrouped   map[string]struct{}
	ungroupedMu sync.Mutex
	wg          sync.WaitGroup
}

// New returns a controller. logger may be nil.
func New(cfg Config, st store.Store, dsp Dispatcher, tr Tracker, logger *slog.Logger) *Controller {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg.withDefaults(), st: st, dsp: dsp, tr: tr, log: logger, now: func() time.Time { return time.Now().UTC() },
		ungrouped: map[string]struct{}{}}
}

// Config returns the effective configuration.
func (c *Controller) Config() Config { return c.cfg }

// Start runs the sweeper until ctx ends: a scan (stale jobs, job and run
// deadlines) at once and every ScanInterval, and the queue-timeout sweep
// every QueueSweepInterval. Wait blocks until it stopped.
func (c *Controller) Start(ctx context.Context) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		scan := time.NewTicker(c.cfg.ScanInterval)
		defer scan.Stop()
		queue := time.NewTicker(c.cfg.QueueSweepInterval)
		defer queue.Stop()
		c.Scan(ctx)
		c.SweepQueue(ctx)
		c.SweepUnroutable(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-scan.C:
				c.Scan(ctx)
			case <-queue.C:
				c.SweepQueue(ctx)
				c.SweepUnroutable(ctx)
			}
		}
	}()
}

// Wait blocks until the sweeper started by Start has returned.
func (c *Controller) Wait() { c.wg.Wait() }

// DrainStatus is the orchestrator's drain state; the admin API serves it
// as it is.
type DrainStatus = apitypes.DrainStatus

// SetDraining turns drain mode on (true) or off and returns the snapshot.
func (c *Controller) SetDraining(on bool) DrainStatus {
	c.dsp.SetDraining(on)
	if on {
		c.log.Info("orchestrator draining: new jobs stay queued, running jobs finish")
	} else {
		c.log.Info("orchestrator drain ended: dispatching queued jobs")
	}
	return c.Drain()
}

// Drain returns the current drain snapshot.
func (c *Controller) Drain() DrainStatus {
	return DrainStatus{Draining: c.dsp.Draining(), JobsRunning: c.dsp.JobsRunning()}
}

// CancelRun cancels a run (KiCI cancelRunWithReason): the run becomes
// cancelling, its unstarted jobs cancelled (queue entries expired), and each
// running job's agent gets job.cancel {reason, force}; a running job whose
// agent is not connected is cancelled at once. Graceful (force false): the
// agent sends SIGTERM, waits the job's grace, SIGKILLs, then runs the
// job's cleanup steps; force: SIGKILL, no cleanup. Cancelling a run that
// is already cancelling sends the cancels again (a second cancel escalates
// to SIGKILL on the agent). It returns the run status afterwards:
// "cancelling" while agents have to confirm, else the final status.
// Errors: ErrRunNotFound, ErrRunTerminal, store errors.
func (c *Controller) CancelRun(ctx context.Context, runID string, force bool, by string) (string, error) {
	run, err := c.st.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrRunNotFound
	}
	if err != nil {
		return "", err
	}
	if run.Status.IsTerminal() {
		return "", ErrRunTerminal
	}
	reason := string(status.JobCancelled)
	if by != "" {
		reason = "cancelled by " + by
	}
	return c.cancel(ctx, run, reason, force)
}

func (c *Controller) cancel(ctx context.Context, run *store.Run, reason string, force bool) (string, error) {
	if _, err := c.st.UpdateRunStatus(ctx, run.ID, status.RunsMovingTo(status.RunCancelling),
		status.RunCancelling, store.RunUpdate{}); err != nil {
		return "", fmt.Errorf("runctl: mark run %s cancelling: %w", run.ID, err)
	}
	c.log.Info("cancelling run", "runId", run.ID, "reason", reason, "force", force)
	res, err := c.tr.CancelJobs(ctx, run.ID, reason)
	if err != nil {
		return "", err
	}
	for _, j := range res.Cancelled {
		if _, err := c.dsp.ExpireQueued(ctx, j.ID); err != nil {
			c.log.Warn("expire queue entry", "jobId", j.ID, "err", err)
		}
		// A queued job may already sit on an agent that has not started it.
		c.dsp.AbortJob(ctx, j.ID, reason)
	}
	for _, j := range res.Running {
		if _, err := c.st.UpdateJobStatus(ctx, j.ID, status.JobsMovingTo(status.JobCancelling),
			status.JobCancelling, store.JobUpdate{}); err != nil {
			return "", fmt.Errorf("runctl: mark job %s cancelling: %w", j.ID, err)
		}
		if c.dsp.CancelJob(j.ID, reason, force) {
			continue
		}
		c.dsp.AbortJob(ctx, j.ID, reason)
		if err := c.tr.JobFinished(ctx, j.ID, status.JobCancelled, reason+" (no connected agent to confirm)", c.now()); err != nil {
			return "", err
		}
	}
	after, err := c.st.GetRun(ctx, run.ID)
	if err != nil {
		return "", err
	}
	return string(after.Status), nil
}
