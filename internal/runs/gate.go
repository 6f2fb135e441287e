package runs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// Verdict is a Gate's decision on a ready job: GatePass, GateReject or
// GateHeld (kici's dispatch-time context flow, see
// docs/kici-compatibility.md#contexts-and-secrets).
type Verdict string

// Gate verdicts.
const (
	// GatePass: the job may be queued.
	GatePass Verdict = "pass"
	// GateReject: the job fails at once with GateResult.Message.
	GateReject Verdict = "reject"
	// GateHeld: the gate moved the job to status.JobHeld (with its hold); it
	// resumes through ReleaseHeld or ends through CancelHeld.
	GateHeld Verdict = "held"
)

// GateResult is a Gate's verdict on one ready job.
type GateResult struct {
	Verdict Verdict
	// Message is the job's error message for GateReject.
	Message string
}

// Gate decides, when a job's needs are met, whether it may be queued (the
// dispatch-time context flow: hard gates, trust, reviewers, wait timers —
// implemented by package approval). It is called under the run's lock and
// must not call back into the tracker. An error leaves the job pending; the
// tracker retries it at the next RetryGated call.
type Gate interface {
	Check(ctx context.Context, run *store.Run, job *store.Job) (GateResult, error)
}

// gateState holds the dispatch gate (fixed at construction) and the runs to
// re-check after a gate error.
type gateState struct {
	gate  Gate
	mu    sync.Mutex // guards retry
	retry map[string]bool
}

func (t *Tracker) gate() Gate { return t.gates.gate }

func (t *Tracker) retryLater(runID string) {
	t.gates.mu.Lock()
	defer t.gates.mu.Unlock()
	if t.gates.retry == nil {
		t.gates.retry = map[string]bool{}
	}
	t.gates.retry[runID] = true
}

// RetryGated re-evaluates the runs whose gate check failed with an error
// (e.g. the database was briefly unavailable). Call it periodically.
func (t *Tracker) RetryGated(ctx context.Context) {
	t.gates.mu.Lock()
	ids := make([]string, 0, len(t.gates.retry))
	for id := range t.gates.retry {
		ids = append(ids, id)
	}
	t.gates.retry = nil
	t.gates.mu.Unlock()
	for _, id := range ids {
		if err := t.Reevaluate(ctx, id); err != nil {
			t.log.Error("gate retry failed", "runId", id, "error", err)
		}
	}
}

// checkGate runs the gate on a ready pending job. It reports whether the
// job may be released now; when it may not, the gate has held it, the job
// was failed (reject), or it stays pending for a retry.
func (t *Tracker) checkGate(ctx context.Context, run func() (*store.Run, error), j *store.Job, at time.Time) (bool, error) {
	g := t.gate()
	if g == nil {
		return true, nil
	}
	r, err := run()
	if err != nil {
		return false, err
	}
	res, err := g.Check(ctx, r, j)
	if err != nil {
		t.log.Error("dispatch gate failed; job stays pending and is retried", "runId", j.RunID, "jobId", j.ID, "error", err)
		t.retryLater(j.RunID)
		return false, nil
	}
	switch res.Verdict {
	case GatePass:
		return true, nil
	case GateHeld:
		t.log.Info("job held", "runId", j.RunID, "jobId", j.ID, "job", j.JobName)
		return false, t.refresh(ctx, j)
	default:
		msg := res.Message
		zero := int64(0)
		ok, err := t.st.UpdateJobStatus(ctx, j.ID, []status.Job{status.JobPending}, status.JobFailed,
			store.JobUpdate{ErrorMessage: &msg, CompletedAt: &at, DurationMs: &zero})
		if err != nil {
			return false, fmt.Errorf("runs: reject job %s: %w", j.ID, err)
		}
		if ok {
			t.log.Info("job rejected by dispatch gate", "runId", j.RunID, "jobId", j.ID, "job", j.JobName, "reason", msg)
			t.fireJobFinished(j, status.JobFailed)
		}
		return false, t.refresh(ctx, j)
	}
}

// ReleaseHeld moves held jobs of a run back to pending and re-evaluates the
// run, so each passes its gate again (which now sees the approved or
// elapsed hold) and is queued. Jobs no longer held are ignored.
func (t *Tracker) ReleaseHeld(ctx context.Context, runID string, jobIDs []string) error {
	mu := t.runLock(runID)
	mu.Lock()
	defer mu.Unlock()
	empty := ""
	for _, id := range jobIDs {
		if _, err := t.st.UpdateJobStatus(ctx, id, []status.Job{status.JobHeld}, status.JobPending, store.JobUpdate{PendingReason: &empty}); err != nil {
			return fmt.Errorf("runs: release held job %s: %w", id, err)
		}
	}
	if err := t.evaluateLocked(ctx, runID, t.now()); err != nil {
		return err
	}
	return t.leaveHeld(ctx, runID)
}

// CancelHeld cancels held jobs of a run with message as their error (a
// rejected or expired hold); their downstream jobs are skipped and the run
// completes when nothing else is left.
func (t *Tracker) CancelHeld(ctx context.Context, runID string, jobIDs []string, message string) error {
	mu := t.runLock(runID)
	mu.Lock()
	defer mu.Unlock()
	at := t.now()
	zero := int64(0)
	for _, id := range jobIDs {
		ok, err := t.st.UpdateJobStatus(ctx, id, []status.Job{status.JobHeld}, status.JobCancelled,
			store.JobUpdate{ErrorMessage: &message, CompletedAt: &at, DurationMs: &zero})
		if err != nil {
			return fmt.Errorf("runs: cancel held job %s: %w", id, err)
		}
		if ok {
			j, err := t.st.GetJob(ctx, id)
			if err != nil {
				return fmt.Errorf("runs: job %s: %w", id, err)
			}
			t.log.Info("held job cancelled", "runId", runID, "jobId", id, "job", j.JobName, "reason", message)
			t.fireJobFinished(j, status.JobCancelled)
		}
	}
	if err := t.evaluateLocked(ctx, runID, at); err != nil {
		return err
	}
	return t.leaveHeld(ctx, runID)
}

// liveJobStatuses are the statuses of jobs handed to dispatch or an agent.
var liveJobStatuses = []status.Job{status.JobQueued, status.JobRunning, status.JobRecovering, status.JobCancelling}

// heldAndLive reports whether jobs include a held one and a queued or
// running one.
func heldAndLive(jobs []*store.Job) (held, live bool) {
	for _, j := range jobs {
		held = held || j.Status == status.JobHeld
		live = live || slices.Contains(liveJobStatuses, j.Status)
	}
	return held, live
}

// markRunHeld shows a run as held while it has a held job and nothing
// queued or running. It writes only in that state, so evaluating a run
// with no held work costs nothing extra.
func (t *Tracker) markRunHeld(ctx context.Context, runID string, jobs []*store.Job) error {
	if held, live := heldAndLive(jobs); held && !live {
		_, err := t.st.UpdateRunStatus(ctx, runID, []status.Run{status.RunPending, status.RunRunning}, status.RunHeld, store.RunUpdate{})
		return err
	}
	return nil
}

// leaveHeld moves a held run back — to running if it ever started, else to
// pending — once work is live again or nothing is held any more. Called
// after held jobs were released or cancelled, the only changes that can
// end a run's held state (a job starting moves it to running itself).
func (t *Tracker) leaveHeld(ctx context.Context, runID string) error {
	run, err := t.st.GetRun(ctx, runID)
	if err != nil || run.Status != status.RunHeld {
		return err
	}
	jobs, err := t.st.ListJobs(ctx, runID)
	if err != nil {
		return err
	}
	if held, live := heldAndLive(jobs); held && !live {
		return nil
	}
	to := status.RunPending
	if run.StartedAt != nil {
		to = status.RunRunning
	}
	_, err = t.st.UpdateRunStatus(ctx, runID, []status.Run{status.RunHeld}, to, store.RunUpdate{})
	return err
}
