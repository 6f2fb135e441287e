package runs

import (
	"context"
	"fmt"
	"slices"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// CancelResult says what CancelJobs did to a run's jobs.
type CancelResult struct {
	// Cancelled are the jobs that had not started (pending or queued) and
	// are now cancelled; a queued one may sit on an agent that has not
	// reported it running yet.
	Cancelled []*store.Job
	// Running are the jobs an agent runs (running, recovering, cancelling):
	// they end when their agent confirms.
	Running []*store.Job
}

// CancelJobs is the tracker half of a run cancel (KiCI's cancelRunWithReason;
// see docs/kici-compatibility.md#runs-and-statuses): under the run's lock,
// every pending, held or queued job becomes cancelled with reason as its error
// (so nothing downstream is released any more), and the run completes at
// once when no job is left running. Jobs already running are returned for
// the caller to signal. ErrNotFound (wrapped) for an unknown run.
func (t *Tracker) CancelJobs(ctx context.Context, runID, reason string) (*CancelResult, error) {
	mu := t.runLock(runID)
	mu.Lock()
	defer mu.Unlock()
	if _, err := t.st.GetRun(ctx, runID); err != nil {
		return nil, fmt.Errorf("runs: run %s: %w", runID, err)
	}
	jobs, err := t.st.ListJobs(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("runs: run %s: %w", runID, err)
	}
	at := t.now()
	res := &CancelResult{}
	for _, j := range jobs {
		switch j.Status {
		case status.JobPending, status.JobQueued, status.JobHeld:
			zero := int64(0)
			ok, err := t.st.UpdateJobStatus(ctx, j.ID, []status.Job{status.JobPending, status.JobQueued, status.JobHeld}, status.JobCancelled,
				store.JobUpdate{ErrorMessage: &reason, CompletedAt: &at, DurationMs: &zero})
			if err != nil {
				return nil, fmt.Errorf("runs: cancel job %s: %w", j.ID, err)
			}
			if err := t.refresh(ctx, j); err != nil {
				return nil, err
			}
			if ok {
				t.fireJobFinished(j, status.JobCancelled)
				res.Cancelled = append(res.Cancelled, j)
				t.log.Info("job cancelled before start", "runId", runID, "jobId", j.ID, "job", j.JobName)
			} else if slices.Contains([]status.Job{status.JobRunning, status.JobRecovering, status.JobCancelling}, j.Status) {
				res.Running = append(res.Running, j)
			}
		case status.JobRunning, status.JobRecovering, status.JobCancelling:
			res.Running = append(res.Running, j)
		}
	}
	return res, t.completeIfDone(ctx, runID, jobs, at)
}
