package runctl

import (
	"context"
	"fmt"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// Prefixes of the errors the sweeper writes (KiCI's reason prefixes).
const (
	// JobTimeoutPrefix starts the error of a job failed at its deadline.
	JobTimeoutPrefix = "job_timeout: "
	// WorkflowTimeoutPrefix starts the cancel reason of a run past its
	// workflow timeout.
	WorkflowTimeoutPrefix = "workflow_timeout: "
	// NeverDispatched is the queue-timeout error of a job without a
	// recorded pending reason.
	NeverDispatched = "never dispatched"
)

// liveJobStatuses are the statuses of jobs an agent holds.
var liveJobStatuses = []status.Job{status.JobRunning, status.JobRecovering, status.JobCancelling}

// Scan runs one stale/deadline pass (see the package documentation). Passes
// never overlap.
func (c *Controller) Scan(ctx context.Context) {
	c.sweepMu.Lock()
	defer c.sweepMu.Unlock()
	now := c.now()
	jobs, err := c.st.ListJobsByStatus(ctx, liveJobStatuses)
	if err != nil {
		c.log.Warn("sweep: list running jobs", "err", err)
		return
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		c.checkJob(ctx, j, now)
	}
	c.checkRuns(ctx, now)
	c.reconcileGroups(ctx)
}

// checkJob ends one live job that is stale or past its deadline.
func (c *Controller) checkJob(ctx context.Context, j *store.Job, now time.Time) {
	last := j.CreatedAt
	if j.StartedAt != nil {
		last = *j.StartedAt
	}
	if j.LastHeartbeatAt != nil && j.LastHeartbeatAt.After(last) {
		last = *j.LastHeartbeatAt
	}
	if silent := now.Sub(last); silent > c.cfg.StaleThreshold {
		final, msg := status.JobTimedOutStale, fmt.Sprintf("no heartbeat for %s", silent.Round(time.Second))
		if j.Status == status.JobCancelling {
			final, msg = status.JobCancelled, "cancel not confirmed: "+msg
		}
		c.end(ctx, j, final, msg, now)
		return
	}
	if j.TimeoutMs > 0 && j.StartedAt != nil {
		limit := time.Duration(j.TimeoutMs) * time.Millisecond
		if now.After(j.StartedAt.Add(limit + c.cfg.DeadlineGrace)) {
			c.end(ctx, j, status.JobFailed,
				fmt.Sprintf("%sjob exceeded its %s timeout (ended by the orchestrator: the agent did not report it within %s)", JobTimeoutPrefix, limit, c.cfg.DeadlineGrace), now)
		}
	}
}

// end terminates a job on the orchestrator's authority: the agent (if any)
// is told to stop at once, then the job row moves to final.
func (c *Controller) end(ctx context.Context, j *store.Job, final status.Job, msg string, now time.Time) {
	c.log.Warn("ending job", "runId", j.RunID, "jobId", j.ID, "job", j.JobName, "status", final, "reason", msg)
	c.dsp.AbortJob(ctx, j.ID, msg)
	if err := c.tr.JobFinished(ctx, j.ID, final, msg, now); err != nil {
		c.log.Error("sweep: finish job", "jobId", j.ID, "err", err)
	}
}

// checkRuns cancels runs past their workflow timeout and, a DeadlineGrace
// later, fails whatever jobs their agents did not end.
func (c *Controller) checkRuns(ctx context.Context, now time.Time) {
	const page = 100
	for offset := 0; ; offset += page {
		runs, _, err := c.st.ListRuns(ctx, store.RunFilter{Statuses: []status.Run{status.RunPending, status.RunRunning, status.RunCancelling}, Limit: page, Offset: offset})
		if err != nil {
			c.log.Warn("sweep: list runs", "err", err)
			return
		}
		for _, r := range runs {
			if r.TimeoutMs <= 0 {
				continue
			}
			limit := time.Duration(r.TimeoutMs) * time.Millisecond
			deadline := r.CreatedAt.Add(limit)
			if !now.After(deadline) {
				continue
			}
			reason := fmt.Sprintf("%srun exceeded its %s timeout", WorkflowTimeoutPrefix, limit)
			if r.Status != status.RunCancelling {
				if _, err := c.cancel(ctx, r, reason, false); err != nil {
					c.log.Error("sweep: cancel timed-out run", "runId", r.ID, "err", err)
				}
				continue
			}
			if now.After(deadline.Add(c.cfg.DeadlineGrace)) {
				jobs, err := c.st.ListJobs(ctx, r.ID)
				if err != nil {
					continue
				}
				for _, j := range jobs {
					if !j.Status.IsTerminal() {
						c.end(ctx, j, status.JobFailed, reason+" (its agent did not stop the job in time)", now)
					}
				}
			}
		}
		if len(runs) < page {
			return
		}
	}
}

// queueTimeout is the queue timeout of this pass: the live
// Config.QueueTimeoutFunc value (0 = never, returned as -1), else
// Config.QueueTimeout (negative = never).
func (c *Controller) queueTimeout(ctx context.Context) time.Duration {
	if f := c.cfg.QueueTimeoutFunc; f != nil {
		switch v := f(ctx); {
		case v == 0:
			return -1
		case v > 0:
			return v
		}
	}
	return c.cfg.QueueTimeout
}

// SweepQueue expires queue entries waiting longer than the queue timeout
// (read on every pass, see queueTimeout): the
// entry becomes expired and the job timed_out_stale with "queue timeout
// (<d>) expired: <pending reason>" as its error (KiCI).
func (c *Controller) SweepQueue(ctx context.Context) {
	timeout := c.queueTimeout(ctx)
	if timeout < 0 {
		return
	}
	c.sweepMu.Lock()
	defer c.sweepMu.Unlock()
	now := c.now()
	entries, err := c.st.ListQueue(ctx, []string{store.QueuePending})
	if err != nil {
		c.log.Warn("sweep: list queue", "err", err)
		return
	}
	for _, e := range entries {
		if !now.After(e.CreatedAt.Add(timeout)) {
			continue
		}
		job, err := c.st.GetJob(ctx, e.ID)
		if err != nil {
			continue
		}
		changed, err := c.dsp.ExpireQueued(ctx, e.ID)
		if err != nil || !changed {
			continue
		}
		why := job.PendingReason
		if why == "" {
			why = NeverDispatched
		}
		msg := fmt.Sprintf("queue timeout (%s) expired: %s", timeout, why)
		c.log.Warn("queued job expired", "runId", job.RunID, "jobId", job.ID, "job", job.JobName, "reason", msg)
		if err := c.tr.JobFinished(ctx, job.ID, status.JobTimedOutStale, msg, now); err != nil {
			c.log.Error("sweep: finish expired job", "jobId", job.ID, "err", err)
		}
	}
}
