package runctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/dispatch"
)

// SweepUnroutable fails queued jobs that nothing can serve: a job whose
// routing reason has said "unroutable: …" (no connected agent fits, no
// scaler label set can spawn one; dispatch.ReasonUnroutablePrefix) on
// every pass for at least UnroutableGrace ends failed with that reason,
// instead of waiting the whole queue timeout as "no agent online" (KiCI
// 0.9.1's unroutable fast-fail, KICI_UNROUTABLE_GRACE_MS). A job that
// becomes routable in between (an agent with its labels connects, a
// reload adds a label set) starts its grace again. The clock starts when
// this orchestrator first sees the job unroutable, so a restart gives
// such jobs a fresh grace.
func (c *Controller) SweepUnroutable(ctx context.Context) {
	grace := c.cfg.UnroutableGrace
	if grace <= 0 {
		return
	}
	c.sweepMu.Lock()
	defer c.sweepMu.Unlock()
	now := c.now()
	// One read of the queued jobs (their pending reasons), not one job read
	// per queue entry: with thousands of jobs parked this pass used to make
	// thousands of store reads. ExpireQueued only changes an entry still
	// pending in the queue.
	jobs, err := c.st.ListJobsByStatus(ctx, []status.Job{status.JobQueued})
	if err != nil {
		c.log.Warn("sweep: list queued jobs", "err", err)
		return
	}
	seen := make(map[string]time.Time, len(c.unroutableSince))
	for _, job := range jobs {
		if !strings.HasPrefix(job.PendingReason, dispatch.ReasonUnroutablePrefix) {
			continue
		}
		since, ok := c.unroutableSince[job.ID]
		if !ok {
			since = now
		}
		if now.Sub(since) < grace {
			seen[job.ID] = since
			continue
		}
		changed, err := c.dsp.ExpireQueued(ctx, job.ID)
		if err != nil || !changed {
			continue
		}
		msg := fmt.Sprintf("%s (for %s)", job.PendingReason, grace)
		c.log.Warn("unroutable job failed", "runId", job.RunID, "jobId", job.ID, "job", job.JobName, "reason", msg)
		if err := c.tr.JobFinished(ctx, job.ID, status.JobFailed, msg, now); err != nil {
			c.log.Error("sweep: finish unroutable job", "jobId", job.ID, "err", err)
		}
	}
	c.unroutableSince = seen
}
