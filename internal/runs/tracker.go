// Package runs tracks runs and jobs on the orchestrator: it persists a
// run with its jobs, releases jobs whose needs are satisfied to dispatch,
// skips jobs whose needs can no longer be met (cascading), and derives the
// run status once every job is terminal.
//
// Semantics follow KiCI's needs scheduler and execution tracker
// (see docs/kici-compatibility.md#runs-and-statuses):
//   - each need edge has a runOn set of upstream terminal statuses (default
//     ["success"]);
//   - an upstream terminal status outside its edge's set skips the downstream
//     at once with errorMessage "upstream_unmet: <upstream> (<status>)"; a
//     skip is terminal and cascades by the same rule;
//   - when every upstream is terminal and each status is inside its edge's
//     set, the downstream is released (pending → queued + Enqueuer.EnqueueJob);
//   - a run completes when all its jobs are terminal: failed if any job is
//     failed, timed_out_stale or drift_dropped ("Failed jobs: a, b"), else
//     cancelled if any is cancelled, else success.
//
// Every status change goes through the store's conditional updates, so
// concurrent or replayed events never release a job twice, move a row
// backwards or complete a run twice.
package runs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// defaultNeedRunOnWord is the runOn set of a need that lists none.
const defaultNeedRunOnWord = status.JobSuccess

// UpstreamUnmetPrefix starts the errorMessage of a job skipped because an
// upstream ended outside its edge's runOn set.
const UpstreamUnmetPrefix = "upstream_unmet: "

// ErrNoJobs is returned by CreateRun for a run without jobs (such a run could
// never complete).
var ErrNoJobs = errors.New("runs: run has no jobs")

// Enqueuer hands a ready job to dispatch.
type Enqueuer interface {
	// EnqueueJob queues a job (status already "queued" in the store) for an
	// agent.
	EnqueueJob(ctx context.Context, job *store.Job) error
}

// lockStripes is the number of per-run evaluation locks (runs hash onto them).
const lockStripes = 64

// Tracker owns run/job state transitions. It is safe for concurrent use.
type Tracker struct {
	st  store.Store
	log *slog.Logger
	now func() time.Time

	stripes [lockStripes]sync.Mutex

	gates gateState    // dispatch gate (gate.go)
	subs  []Subscriber // enq, TrackerDeps.Subscribers, then Subscribe (subscriber.go)
	// queuer is the first of subs that is an EntryQueuer, or nil
	// (releasejob.go); set with subs.
	queuer EntryQueuer
}

// TrackerDeps are a tracker's optional collaborators.
type TrackerDeps struct {
	// Gate decides whether a job whose needs are met may be queued (package
	// approval); nil lets every ready job pass.
	Gate Gate
	// Subscribers are told of the run and job lifecycle, in order, after
	// the enqueuer; more may subscribe later (Tracker.Subscribe).
	Subscribers []Subscriber
}

// NewTracker returns a tracker over st that hands released jobs to enq
// (nil: only to the subscribers), with the optional collaborators of deps.
// A nil logger discards logs.
func NewTracker(st store.Store, enq Enqueuer, logger *slog.Logger, deps TrackerDeps) *Tracker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var subs []Subscriber
	if enq != nil {
		subs = append(subs, enqueuer{enq: enq})
	}
	t := &Tracker{st: st, log: logger, now: func() time.Time { return time.Now().UTC() }, gates: gateState{gate: deps.Gate}}
	t.Subscribe(append(subs, deps.Subscribers...)...)
	return t
}

func (t *Tracker) fireJobFinished(j *store.Job, final status.Job) {
	for _, s := range t.subs {
		c := *j
		c.Status = final
		s.JobFinished(&c)
	}
}

func (t *Tracker) runLock(runID string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(runID))
	return &t.stripes[h.Sum32()%lockStripes]
}

// CreateRun persists run and jobs (all pending; run.Status "pending" and
// CreatedAt defaulted when zero) in one store transaction, then releases the
// jobs without needs (status queued + EnqueueJob). Errors: ErrNoJobs, a job
// whose RunID differs from run.ID or whose need names no job of the run, and
// store errors. Enqueue failures are logged, not returned: the job stays
// queued in the store and Recover re-enqueues it.
func (t *Tracker) CreateRun(ctx context.Context, run *store.Run, jobs []*store.Job) error {
	return t.CreateRunWithContext(ctx, run, jobs, nil)
}

// CreateRunWithContext is CreateRun that also stores the run's context
// (inputs, changed paths; nil for none) before the first evaluation, so the
// jobs' conditions already see it.
func (t *Tracker) CreateRunWithContext(ctx context.Context, run *store.Run, jobs []*store.Job, rc *store.RunContext) error {
	return t.CreateRerun(ctx, run, jobs, rc, nil, "")
}

// CreateRerun is CreateRunWithContext for a rerun that keeps some jobs of
// the run it reruns (rerun --failed, a single check's re-run): the jobs
// named in carried (job name → that job's result) are stored with their
// status and outputs ("carried over from run <from>") before the first
// evaluation, so only the other jobs run.
func (t *Tracker) CreateRerun(ctx context.Context, run *store.Run, jobs []*store.Job, rc *store.RunContext, carried map[string]CarriedJob, from string) error {
	now := t.now()
	if err := t.prepareRun(run, jobs, now); err != nil {
		return err
	}
	mu := t.runLock(run.ID)
	mu.Lock()
	defer mu.Unlock()
	if err := t.st.CreateRun(ctx, run, jobs); err != nil {
		return fmt.Errorf("runs: create run %s: %w", run.ID, err)
	}
	if rc != nil && (len(rc.Inputs) > 0 || len(rc.ChangedPaths) > 0) {
		if err := t.st.PutRunContext(ctx, run.ID, rc); err != nil {
			return fmt.Errorf("runs: create run %s: %w", run.ID, err)
		}
	}
	if err := t.carryOver(ctx, jobs, carried, from, now); err != nil {
		return err
	}
	t.log.Info("run created", "runId", run.ID, "workflow", run.WorkflowName, "jobs", len(jobs))
	return t.evaluateLocked(ctx, run.ID, now)
}

// JobStarted moves a job from pending, queued or recovering to running,
// stamping agentID, startedAt (first start only) and the heartbeat, and moves
// its run from pending to running (startedAt). Idempotent: a replay for a
// job already running only refreshes the heartbeat; a job already terminal is
// left alone. ErrNotFound (wrapped) for an unknown job.
func (t *Tracker) JobStarted(ctx context.Context, jobID, agentID string, at time.Time) error {
	at = at.UTC()
	// One store call for the common case (one statement on PostgreSQL):
	// the job's move and its run's, the job's row returned; a start time
	// already set is kept (a start reported again).
	u := store.JobUpdate{LastHeartbeatAt: &at, StartedAtIfUnset: &at}
	if agentID != "" {
		u.AgentID = &agentID
	}
	job, err := t.st.StartJob(ctx, jobID, u, at)
	if err != nil {
		return fmt.Errorf("runs: start job %s: %w", jobID, err)
	}
	if job == nil {
		// Not moved: unknown (an error), already running (the agent said
		// so again: a heartbeat), or in a status a start does not leave.
		cur, err := t.st.GetJob(ctx, jobID)
		if err != nil {
			return fmt.Errorf("runs: job %s: %w", jobID, err)
		}
		if cur.Status == status.JobRunning {
			if err := t.st.TouchJobHeartbeat(ctx, jobID, at); err != nil {
				return fmt.Errorf("runs: heartbeat job %s: %w", jobID, err)
			}
		}
		return nil
	}
	t.log.Info("job started", "runId", job.RunID, "jobId", jobID, "job", job.JobName, "agentId", agentID)
	return nil
}

// JobFinished moves a non-terminal job to the terminal status (one of
// store.TerminalJobStatuses), stamping completedAt, durationMs (from its
// startedAt, when it started) and errMsg (when not empty); then releases or
// skips its downstream jobs and completes the run when every job is
// terminal. Idempotent: a replayed terminal status changes nothing (the
// downstream evaluation it triggers finds nothing left to do). Errors: a
// non-terminal status, ErrNotFound (wrapped), store errors.
func (t *Tracker) JobFinished(ctx context.Context, jobID string, final status.Job, errMsg string, at time.Time) error {
	if !final.IsTerminal() {
		return fmt.Errorf("runs: job %s: %q is not a terminal job status", jobID, final)
	}
	at = at.UTC()
	job, err := t.st.GetJob(ctx, jobID)
	if err != nil {
		return fmt.Errorf("runs: job %s: %w", jobID, err)
	}
	mu := t.runLock(job.RunID)
	mu.Lock()
	defer mu.Unlock()
	if !job.Status.IsTerminal() {
		u := store.JobUpdate{CompletedAt: &at}
		if job.StartedAt != nil {
			d := max(at.Sub(*job.StartedAt).Milliseconds(), 0)
			u.DurationMs = &d
		}
		if errMsg != "" {
			u.ErrorMessage = &errMsg
		}
		changed, err := t.st.UpdateJobStatus(ctx, jobID, nil, final, u)
		if err != nil {
			return fmt.Errorf("runs: finish job %s: %w", jobID, err)
		}
		if changed {
			t.log.Info("job finished", "runId", job.RunID, "jobId", jobID, "job", job.JobName, "status", final)
			t.fireJobFinished(job, final)
		}
	} else if job.Status != final {
		t.log.Debug("job already terminal; status ignored", "jobId", jobID, "stored", job.Status, "reported", final)
	}
	return t.evaluateLocked(ctx, job.RunID, at)
}

// StepStatus records a step row (store.UpsertStep); a terminal step status is
// never overwritten by a non-terminal one.
func (t *Tracker) StepStatus(ctx context.Context, s *store.Step) error {
	if err := t.st.UpsertStep(ctx, s); err != nil {
		return fmt.Errorf("runs: step %d of job %s: %w", s.StepIndex, s.JobID, err)
	}
	return nil
}

// Recover repairs state after a restart: re-enqueues queued jobs that have no
// dispatch queue entry, releases or skips pending jobs whose upstreams are
// terminal, and completes non-terminal runs whose jobs are all terminal.
// Errors of individual runs are logged and joined into the result.
func (t *Tracker) Recover(ctx context.Context) error {
	var errs []error
	queued, err := t.st.ListJobsByStatus(ctx, []status.Job{status.JobQueued})
	if err != nil {
		return fmt.Errorf("runs: recover: %w", err)
	}
	if len(queued) > 0 {
		entries, err := t.st.ListQueue(ctx, nil)
		if err != nil {
			return fmt.Errorf("runs: recover: %w", err)
		}
		inQueue := make(map[string]bool, len(entries))
		for _, e := range entries {
			inQueue[e.ID] = true
		}
		for _, j := range queued {
			if inQueue[j.ID] {
				continue
			}
			t.log.Info("re-enqueueing queued job without queue entry", "runId", j.RunID, "jobId", j.ID)
			if err := t.release(ctx, j, nil); err != nil {
				errs = append(errs, fmt.Errorf("enqueue job %s: %w", j.ID, err))
			}
		}
	}

	runIDs := map[string]bool{}
	var order []string
	add := func(id string) {
		if !runIDs[id] {
			runIDs[id] = true
			order = append(order, id)
		}
	}
	pending, err := t.st.ListJobsByStatus(ctx, []status.Job{status.JobPending})
	if err != nil {
		return fmt.Errorf("runs: recover: %w", err)
	}
	for _, j := range pending {
		add(j.RunID)
	}
	const page = 100
	for offset := 0; ; offset += page {
		runs, _, err := t.st.ListRuns(ctx, store.RunFilter{Statuses: []status.Run{status.RunPending, status.RunRunning, status.RunCancelling, status.RunHeld}, Limit: page, Offset: offset})
		if err != nil {
			return fmt.Errorf("runs: recover: %w", err)
		}
		for _, r := range runs {
			add(r.ID)
		}
		if len(runs) < page {
			break
		}
	}
	now := t.now()
	for _, id := range order {
		mu := t.runLock(id)
		mu.Lock()
		err := t.evaluateLocked(ctx, id, now)
		mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.log.Error("recovery incomplete", "error", err)
		return fmt.Errorf("runs: recover: %w", err)
	}
	return nil
}

// evaluateLocked releases/skips the pending jobs of a run until nothing
// changes, then completes the run if all jobs are terminal. The run's stripe
// lock must be held.
func (t *Tracker) evaluateLocked(ctx context.Context, runID string, at time.Time) error {
	return t.evaluateWith(ctx, runID, at, nil, nil)
}

// evaluateWith is evaluateLocked from rows in hand: jobs (all the run's,
// in creation order) and run as the caller has just stored them, so a
// run just created costs no read of what it wrote. nil reads them from
// the store. Every change is still a conditional update, so a row some
// other writer changed meanwhile is never moved backwards or twice.
func (t *Tracker) evaluateWith(ctx context.Context, runID string, at time.Time, jobs []*store.Job, run *store.Run) error {
	if jobs == nil {
		var err error
		if jobs, err = t.st.ListJobs(ctx, runID); err != nil {
			return fmt.Errorf("runs: run %s: %w", runID, err)
		}
	}
	byName := make(map[string]*store.Job, len(jobs))
	for _, j := range jobs {
		byName[j.JobName] = j
	}
	admit := t.admission(ctx, runID)
	getRun := func() (*store.Run, error) {
		if run == nil {
			r, err := t.st.GetRun(ctx, runID)
			if err != nil {
				return nil, fmt.Errorf("runs: run %s: %w", runID, err)
			}
			run = r
		}
		return run, nil
	}
	for changed := true; changed; {
		changed = false
		for _, j := range jobs {
			if j.Status != status.JobPending {
				continue
			}
			release, reason := readiness(j, byName)
			if release && reason == "" {
				skip, done, err := t.condition(ctx, getRun, j, jobs, at)
				if err != nil {
					return err
				}
				if done {
					changed = true
					continue
				}
				reason = skip
			}
			switch {
			case reason != "":
				zero := int64(0)
				prev := *j
				ok, err := t.move(ctx, j, []status.Job{status.JobPending}, status.JobSkipped,
					store.JobUpdate{ErrorMessage: &reason, CompletedAt: &at, DurationMs: &zero})
				if err != nil {
					return fmt.Errorf("runs: skip job %s: %w", j.ID, err)
				}
				if ok {
					t.log.Info("job skipped", "runId", runID, "jobId", j.ID, "job", j.JobName, "reason", reason)
					t.fireJobFinished(&prev, status.JobSkipped)
				}
				changed = changed || j.Status.IsTerminal()
			case release && admit():
				pass, err := t.checkGate(ctx, getRun, j, at)
				if err != nil {
					return err
				}
				if !pass {
					changed = changed || j.Status.IsTerminal()
					continue
				}
				// The job is queued in the store even if a subscriber
				// fails to take it; Recover re-drives it.
				if _, err := t.releaseJob(ctx, j); err != nil {
					return fmt.Errorf("runs: release job %s: %w", j.ID, err)
				}
			}
		}
	}
	if err := t.markRunHeld(ctx, runID, jobs); err != nil {
		return fmt.Errorf("runs: run %s: %w", runID, err)
	}
	return t.completeIfDone(ctx, runID, jobs, at)
}

// move changes j's status in the store (store.MoveJob) and leaves j as
// the store has it afterwards: the row the change returned, or, when
// nothing changed (a concurrent writer moved the job first), the row read
// again. It reports whether the change was made.
func (t *Tracker) move(ctx context.Context, j *store.Job, from []status.Job, to status.Job, u store.JobUpdate) (bool, error) {
	row, err := t.st.MoveJob(ctx, j.ID, from, to, u)
	if err != nil {
		return false, err
	}
	if row == nil {
		return false, t.refresh(ctx, j)
	}
	*j = *row
	return true, nil
}

// refresh reloads j from the store in place (its row may have been changed
// by a concurrent writer).
func (t *Tracker) refresh(ctx context.Context, j *store.Job) error {
	fresh, err := t.st.GetJob(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("runs: job %s: %w", j.ID, err)
	}
	*j = *fresh
	return nil
}

// readiness decides a pending job's fate from its upstreams: a non-empty
// reason means skip; release means every upstream is terminal and inside its
// edge's runOn set; neither means wait.
func readiness(j *store.Job, byName map[string]*store.Job) (release bool, reason string) {
	allTerminal := true
	for _, n := range j.Needs {
		up, ok := byName[n.Upstream]
		if !ok {
			return false, UpstreamUnmetPrefix + n.Upstream + " (missing)"
		}
		if !up.Status.IsTerminal() {
			allTerminal = false
			continue
		}
		runOn := n.RunOn
		if len(runOn) == 0 {
			runOn = []status.Job{defaultNeedRunOnWord}
		}
		if !slices.Contains(runOn, up.Status) {
			return false, UpstreamUnmetPrefix + n.Upstream + " (" + string(up.Status) + ")"
		}
	}
	return allTerminal, ""
}

// DeriveRunStatus returns the terminal run status for a run whose jobs are
// all terminal, and the failure reason for a failed run
// ("Failed jobs: a, b" in job order). KiCI computeRunStatus.
func DeriveRunStatus(jobs []*store.Job) (final status.Run, failureReason string) {
	var failed []string
	cancelled := false
	for _, j := range jobs {
		switch j.Status {
		case status.JobFailed, status.JobTimedOutStale, status.JobDriftDropped:
			failed = append(failed, j.JobName)
		case status.JobCancelled:
			cancelled = true
		}
	}
	switch {
	case len(failed) > 0:
		return status.RunFailed, "Failed jobs: " + strings.Join(failed, ", ")
	case cancelled:
		return status.RunCancelled, ""
	default:
		return status.RunSuccess, ""
	}
}

// completeIfDone completes the run when it has jobs and all are terminal.
func (t *Tracker) completeIfDone(ctx context.Context, runID string, jobs []*store.Job, at time.Time) error {
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		if !j.Status.IsTerminal() {
			return nil
		}
	}
	run, err := t.st.GetRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("runs: run %s: %w", runID, err)
	}
	if run.Status.IsTerminal() {
		return nil
	}
	final, reason := DeriveRunStatus(jobs)
	start := run.CreatedAt
	if run.StartedAt != nil {
		start = *run.StartedAt
	}
	if at.Before(start) {
		at = start
	}
	dur := at.Sub(start).Milliseconds()
	u := store.RunUpdate{CompletedAt: &at, DurationMs: &dur}
	if reason != "" {
		u.FailureReason = &reason
	}
	// The row as the change left it goes to the subscribers: no read back.
	done, err := t.st.MoveRun(ctx, runID, nil, final, u)
	if err != nil {
		return fmt.Errorf("runs: complete run %s: %w", runID, err)
	}
	if done == nil {
		return nil
	}
	t.log.Info("run finished", "runId", runID, "workflow", run.WorkflowName, "status", final, "durationMs", dur)
	for _, s := range t.subs {
		s.RunFinished(done)
	}
	return nil
}
