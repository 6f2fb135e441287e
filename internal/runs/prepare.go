package runs

import (
	"context"
	"fmt"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// PrepareRun checks and defaults a run and its jobs exactly as CreateRun
// does before it writes them (run status pending, zero CreatedAt = now,
// jobs pending with RunID = run.ID, needs defaulting runOn to success),
// for a caller that stores them itself in a larger transaction
// (store.FinishDeliveryWithRuns) and then calls RunStored. Errors:
// ErrNoJobs, a job of another run, a duplicate job name, a need naming no
// job of the run or the job itself.
func (t *Tracker) PrepareRun(run *store.Run, jobs []*store.Job) error {
	return t.prepareRun(run, jobs, t.now())
}

// RunStored releases the ready jobs of a run that PrepareRun prepared and
// the caller has stored (status queued + EnqueueJob), as CreateRun does
// after its own write. run and jobs are the rows as stored (all of the
// run's jobs, in creation order): they are evaluated as they are rather
// than read back, which spares a run just created two reads; a job some
// other writer moved meanwhile is caught by the conditional update.
// A failure here leaves the run pending in the store, where Recover and
// Reevaluate pick it up.
func (t *Tracker) RunStored(ctx context.Context, run *store.Run, jobs []*store.Job) error {
	t.log.Info("run created", "runId", run.ID, "workflow", run.WorkflowName, "jobs", len(jobs))
	mu := t.runLock(run.ID)
	mu.Lock()
	defer mu.Unlock()
	// Copies: the evaluation updates its jobs in place, and the caller's
	// rows stay as it stored them.
	own := make([]*store.Job, len(jobs))
	for i, j := range jobs {
		c := *j
		own[i] = &c
	}
	r := *run
	if err := t.evaluateWith(ctx, run.ID, t.now(), own, &r); err != nil {
		return fmt.Errorf("runs: reevaluate run %s: %w", run.ID, err)
	}
	return nil
}

func (t *Tracker) prepareRun(run *store.Run, jobs []*store.Job, now time.Time) error {
	if len(jobs) == 0 {
		return ErrNoJobs
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = now
	}
	run.Status = status.RunPending
	names := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if j.RunID == "" {
			j.RunID = run.ID
		}
		if j.RunID != run.ID {
			return fmt.Errorf("runs: job %s belongs to run %s, not %s", j.ID, j.RunID, run.ID)
		}
		if names[j.JobName] {
			return fmt.Errorf("runs: duplicate job name %q in run %s", j.JobName, run.ID)
		}
		names[j.JobName] = true
		j.Status = status.JobPending
		if j.CreatedAt.IsZero() {
			j.CreatedAt = now
		}
		for i := range j.Needs {
			if len(j.Needs[i].RunOn) == 0 {
				j.Needs[i].RunOn = []status.Job{defaultNeedRunOnWord}
			}
		}
	}
	for _, j := range jobs {
		for _, n := range j.Needs {
			if !names[n.Upstream] {
				return fmt.Errorf("runs: job %q needs unknown job %q", j.JobName, n.Upstream)
			}
			if n.Upstream == j.JobName {
				return fmt.Errorf("runs: job %q needs itself", j.JobName)
			}
		}
	}
	return nil
}
