package runs

import (
	"context"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// Subscriber is told of the run and job lifecycle a Tracker drives; it is
// the one way the tracker reaches the components built on top of it
// (dispatch, run control, the approval resumer, ingest, the forge reporter,
// metrics), so that none of them is imported here. Embed NopSubscriber to
// implement only some of the events.
//
// Subscribers are called synchronously, in the order they subscribed
// (TrackerDeps.Subscribers first, then Subscribe), on the goroutine that
// caused the event; they must not block for long.
type Subscriber interface {
	// Admitter decides whether a run may release jobs at all (workflow
	// concurrency groups): a run is admitted when every subscriber admits
	// it, asked in order until one refuses.
	Admitter
	// JobReady hands on a job the tracker released (status queued in the
	// store). An error stops the later subscribers: the job stays queued
	// and Recover hands it on again.
	JobReady(ctx context.Context, job *store.Job) error
	// JobFinished is told of a job that reached a terminal status through
	// the tracker (reported by its agent, or skipped because an upstream
	// did not satisfy its needs), with its own copy of the job as known at
	// that moment (Status set to the terminal status). It runs under the
	// run's lock.
	JobFinished(job *store.Job)
	// RunFinished is told, once, of a run that reached a terminal status
	// through the tracker, with the run as stored after the change.
	RunFinished(run *store.Run)
}

// NopSubscriber admits every run and ignores every event; embed it to
// implement only some of Subscriber.
type NopSubscriber struct{}

// Admit implements Subscriber: every run is admitted.
func (NopSubscriber) Admit(context.Context, string) bool { return true }

// JobReady implements Subscriber; it does nothing.
func (NopSubscriber) JobReady(context.Context, *store.Job) error { return nil }

// JobFinished implements Subscriber; it does nothing.
func (NopSubscriber) JobFinished(*store.Job) {}

// RunFinished implements Subscriber; it does nothing.
func (NopSubscriber) RunFinished(*store.Run) {}

// enqueuer subscribes an Enqueuer (NewTracker's enq) for released jobs.
type enqueuer struct {
	NopSubscriber
	enq Enqueuer
}

// JobReady implements Subscriber.
func (e enqueuer) JobReady(ctx context.Context, job *store.Job) error {
	return e.enq.EnqueueJob(ctx, job)
}

// Subscribe adds subscribers after those the tracker was built with. The
// server subscribes the components built on the tracker while it is
// wired, before the tracker is used; Subscribe is not safe concurrently
// with the tracker's work.
func (t *Tracker) Subscribe(subs ...Subscriber) {
	t.subs = append(t.subs, subs...)
	if t.queuer == nil {
		t.queuer = firstEntryQueuer(subs)
	}
}

// release hands a released job to every subscriber in order, stopping at
// the first error. With q (the job's queue entry stored with its
// release), the subscriber that built the entry is handed it (JobQueued)
// in its turn instead of JobReady.
func (t *Tracker) release(ctx context.Context, job *store.Job, q *storedEntry) error {
	for _, s := range t.subs {
		var err error
		if q != nil && s == Subscriber(q.by) {
			err = q.by.JobQueued(ctx, job, q.e, q.stored)
		} else {
			err = s.JobReady(ctx, job)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// JobReports is how the frames an agent sends about its job reach the
// tracker: dispatch calls it (dispatch.JobEvents), Tracker implements it.
type JobReports interface {
	// JobStarted marks a job running on agentID at `at`.
	JobStarted(ctx context.Context, jobID, agentID string, at time.Time) error
	// JobFinished moves a job to a terminal status with an error message.
	// nil means the job is terminal in the store (moved now, or before):
	// the dispatcher acknowledges the agent's status on that word.
	JobFinished(ctx context.Context, jobID string, final status.Job, errMsg string, at time.Time) error
	// StepStatus records a step row.
	StepStatus(ctx context.Context, s *store.Step) error
}

var _ JobReports = (*Tracker)(nil)
