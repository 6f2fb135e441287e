package approval

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// Tracker is the part of runs.Tracker the Resumer drives.
type Tracker interface {
	// ReleaseHeld moves held jobs back to pending and re-gates them.
	ReleaseHeld(ctx context.Context, runID string, jobIDs []string) error
	// CancelHeld cancels held jobs with message as their error.
	CancelHeld(ctx context.Context, runID string, jobIDs []string, message string) error
	// RetryGated re-evaluates runs whose gate check failed.
	RetryGated(ctx context.Context)
}

// SweepInterval is how often the Resumer looks for due holds and decided
// holds whose jobs still wait, while any work waits for it (a held job, a
// due or a concurrency hold, a gate check to retry) and nothing kicks it:
// 1 s.
const SweepInterval = time.Second

// IdleSweepInterval is how often the Resumer sweeps when its last sweep
// found no work waiting and nothing has told it of any since (Expect,
// Kick): 1 min. Work that starts waiting on this node tells it at once
// (Gate.OnWaiting, a decision's Kick); the idle sweep is there for what
// only the store shows, such as a hold another node created just before it
// stopped. A node with nothing held then makes three store reads a minute
// for the Resumer instead of 180 (docs/performance.md, "Idle memory").
const IdleSweepInterval = time.Minute

// Resumer ends holds and resumes their work (KiCI stale detector and
// held-run resume): a pending hold past its expiry is released (a wait
// timer) or expired (anything else, which cancels its work); a job still
// held once none of its holds is pending is released (all approved) or
// cancelled (one rejected, expired or cancelled). Because it works from
// the stored holds, a decision written by another process or just before a
// crash is acted on at the next sweep.
type Resumer struct {
	runs.NopSubscriber // told of finished runs (RunFinished)

	st   store.Store
	tr   Tracker
	log  *slog.Logger
	now  func() time.Time
	kick chan struct{}
	// expect is signalled (never blocking) when work starts waiting.
	expect chan struct{}
	// slots retries pending concurrency holds (Gate.TrySlot); nil leaves
	// them to their expiry.
	slots func(ctx context.Context, h *store.HeldRun) (bool, error)
}

// NewResumer returns a Resumer over st that releases and cancels held work
// through tr; slots retries pending concurrency holds (the gate's
// TrySlot; nil leaves them to their expiry). A nil logger discards logs.
// Call Run to start it.
func NewResumer(st store.Store, tr Tracker, slots func(ctx context.Context, h *store.HeldRun) (bool, error), logger *slog.Logger) *Resumer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Resumer{st: st, tr: tr, slots: slots, log: logger, now: func() time.Time { return time.Now().UTC() },
		kick: make(chan struct{}, 1), expect: make(chan struct{}, 1)}
}

// Kick asks for a sweep now (after a decision). It never blocks.
func (r *Resumer) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Expect tells the Resumer that work now waits for it (a job held, a gate
// check to retry): it sweeps every SweepInterval from now on, until a
// sweep finds nothing waiting. It never blocks.
func (r *Resumer) Expect() {
	select {
	case r.expect <- struct{}{}:
	default:
	}
}

// Run sweeps until ctx ends: at once on Kick, every SweepInterval while
// work waits (the last sweep found some or failed, or Expect was called
// before it), and every IdleSweepInterval while none does.
func (r *Resumer) Run(ctx context.Context) {
	t := time.NewTimer(SweepInterval)
	defer t.Stop()
	// expected: Expect was called before this sweep. The gate calls it just
	// before the tracker records a failed check for retry, so the sweep may
	// come between the two and find nothing: the next one then comes a
	// SweepInterval later whatever this one finds.
	expected := false
	for {
		waiting, err := r.sweep(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("approval sweep failed", "error", err)
			waiting = true
		}
		next := IdleSweepInterval
		if waiting || expected {
			next = SweepInterval
		}
		t.Reset(next)
		var ok bool
		if ok, expected = r.await(ctx, t, next); !ok {
			return
		}
	}
}

// await waits for t (set to fire after next), a Kick or the end of ctx. ok
// is false at the end of ctx; expected says whether Expect was called
// meanwhile, which also brings t forward to SweepInterval from now when
// it was set further.
func (r *Resumer) await(ctx context.Context, t *time.Timer, next time.Duration) (ok, expected bool) {
	for {
		select {
		case <-ctx.Done():
			return false, expected
		case <-t.C:
			return true, expected
		case <-r.kick:
			return true, expected
		case <-r.expect:
			expected = true
			if next > SweepInterval {
				next = SweepInterval
				t.Reset(next)
			}
		}
	}
}

// Sweep does one pass: ends due holds, resumes or cancels held jobs whose
// holds are all decided, and retries gate checks that failed.
func (r *Resumer) Sweep(ctx context.Context) error {
	_, err := r.sweep(ctx)
	return err
}

// sweep is Sweep, also reporting whether work may still wait: it ended a
// due hold, found a pending concurrency hold, or found a held job. A
// pending hold holds its job (or, fork-scoped, its run's jobs), so with no
// held job there is nothing to resume; a pending hold left without one (its
// node stopped in between) only has its expiry to act on, which the idle
// sweep does, at most IdleSweepInterval late.
func (r *Resumer) sweep(ctx context.Context) (waiting bool, err error) {
	now := r.now()
	due, err := r.st.ListHeldRuns(ctx, store.HeldRunFilter{Statuses: []hold.Status{hold.Pending}, DueBy: &now, Limit: 1000})
	if err != nil {
		return false, fmt.Errorf("due holds: %w", err)
	}
	for _, h := range due {
		to, action, note := hold.Expired, "held_run.expire", "no decision before "+h.ExpiresAt.Format(time.RFC3339)
		switch h.HoldType {
		case hold.Timer:
			to, action, note = hold.Released, "held_run.timer", "wait timer elapsed"
		case hold.Concurrency:
			note = "waited until " + h.ExpiresAt.Format(time.RFC3339) + " (the concurrency timeout) for context groups " + h.Group
		}
		ok, err := r.st.DecideHeldRun(ctx, h.ID, nil, h.Clauses, to, "system", note, now)
		if err != nil {
			return false, fmt.Errorf("end hold %s: %w", h.ID, err)
		}
		if ok {
			r.log.Info("hold ended", "heldRunId", h.ID, "runId", h.RunID, "jobId", h.JobID, "status", to)
			if err := r.st.AppendAccessLog(ctx, &store.AccessLogEntry{Action: action, Resource: "held_run:" + h.ID + ":run:" + h.RunID, Detail: note}); err != nil {
				r.log.Error("access log", "error", err)
			}
		}
	}
	slotWaits, err := r.retrySlots(ctx, now)
	if err != nil {
		return false, err
	}
	held, err := r.resumeHeldJobs(ctx)
	if err != nil {
		return false, err
	}
	r.tr.RetryGated(ctx)
	return len(due) > 0 || slotWaits > 0 || held > 0, nil
}

// retrySlots tries, oldest first, to give each job waiting for a context
// concurrency slot its slot; a job that got one has its hold released. It
// returns how many pending concurrency holds it found.
func (r *Resumer) retrySlots(ctx context.Context, now time.Time) (int, error) {
	if r.slots == nil {
		return 0, nil
	}
	waiting, err := r.st.ListHeldRuns(ctx, store.HeldRunFilter{Statuses: []hold.Status{hold.Pending}, HoldType: hold.Concurrency, Limit: 1000})
	if err != nil {
		return 0, fmt.Errorf("pending holds: %w", err)
	}
	for _, h := range waiting {
		if h.JobID == "" {
			continue
		}
		ok, err := r.slots(ctx, h)
		if err != nil {
			return 0, fmt.Errorf("concurrency slot for job %s: %w", h.JobID, err)
		}
		if !ok {
			continue
		}
		if _, err := r.st.DecideHeldRun(ctx, h.ID, nil, nil, hold.Released, "system", "concurrency slot free", now); err != nil {
			return 0, fmt.Errorf("release hold %s: %w", h.ID, err)
		}
		r.log.Info("concurrency slot taken; job released", "heldRunId", h.ID, "runId", h.RunID, "jobId", h.JobID)
	}
	return len(waiting), nil
}

// resumeHeldJobs releases or cancels each held job none of whose holds
// (its own, and its run's workflow-scoped ones) is pending. It returns how
// many held jobs it found.
func (r *Resumer) resumeHeldJobs(ctx context.Context) (int, error) {
	jobs, err := r.st.ListJobsByStatus(ctx, []status.Job{status.JobHeld})
	if err != nil {
		return 0, fmt.Errorf("held jobs: %w", err)
	}
	byRun := map[string][]*store.Job{}
	var order []string
	for _, j := range jobs {
		if byRun[j.RunID] == nil {
			order = append(order, j.RunID)
		}
		byRun[j.RunID] = append(byRun[j.RunID], j)
	}
	for _, runID := range order {
		holds, err := r.st.ListHeldRuns(ctx, store.HeldRunFilter{RunID: runID, Limit: 1000})
		if err != nil {
			return 0, fmt.Errorf("holds of run %s: %w", runID, err)
		}
		var release []string
		cancel := map[string][]string{} // message → jobs
		for _, j := range byRun[runID] {
			waiting, failed := false, ""
			for _, h := range holds {
				if h.JobID != "" && h.JobID != j.ID {
					continue
				}
				switch h.Status {
				case hold.Pending:
					waiting = true
				case hold.Rejected, hold.Expired, hold.Cancelled:
					failed = endMessage(h)
				}
			}
			switch {
			case waiting:
			case failed != "":
				cancel[failed] = append(cancel[failed], j.ID)
			default:
				release = append(release, j.ID)
			}
		}
		for msg, ids := range cancel {
			if err := r.tr.CancelHeld(ctx, runID, ids, msg); err != nil {
				return 0, err
			}
		}
		if len(release) > 0 {
			if err := r.tr.ReleaseHeld(ctx, runID, release); err != nil {
				return 0, err
			}
		}
	}
	return len(jobs), nil
}

// endMessage is the error message of a job whose hold ended without
// approval.
func endMessage(h *store.HeldRun) string {
	switch h.Status {
	case hold.Rejected:
		msg := "rejected by " + h.ResolvedBy
		if h.ResolveNote != "" {
			msg += ": " + h.ResolveNote
		}
		return msg
	case hold.Expired:
		if h.HoldType == hold.Concurrency {
			return "no concurrency slot freed up: " + h.ResolveNote
		}
		return "approval expired: " + h.ResolveNote
	}
	return "hold cancelled: " + h.ResolveNote
}

// RunFinished cancels the pending holds of a run that ended (e.g. it was
// cancelled while held), so they no longer block deleting their contexts.
// It implements runs.Subscriber.
func (r *Resumer) RunFinished(run *store.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holds, err := r.st.ListHeldRuns(ctx, store.HeldRunFilter{RunID: run.ID, Statuses: []hold.Status{hold.Pending}, Limit: 1000})
	if err != nil {
		r.log.Error("pending holds of a finished run", "runId", run.ID, "error", err)
		return
	}
	for _, h := range holds {
		if _, err := r.st.DecideHeldRun(ctx, h.ID, nil, h.Clauses, hold.Cancelled, "system", "run "+string(run.Status), r.now()); err != nil {
			r.log.Error("cancel hold of a finished run", "heldRunId", h.ID, "error", err)
		}
	}
}
