package runs

import (
	"context"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// EntryQueuer is a Subscriber that puts released jobs in the dispatch
// queue (dispatch.Dispatcher). With one subscribed, the tracker releases
// a job and stores its queue entry in one store call (store.ReleaseJob)
// and hands that subscriber the stored entry (JobQueued) in place of
// JobReady: one round trip per released job where there were two.
type EntryQueuer interface {
	Subscriber
	// QueueEntry is the entry job is to be queued under; it must not
	// touch the store.
	QueueEntry(job *store.Job) *store.QueueEntry
	// JobQueued takes a released job whose entry e was stored with its
	// release. stored is false when an entry with the job's id was there
	// already, which stays as it is (e is not what is stored).
	JobQueued(ctx context.Context, job *store.Job, e *store.QueueEntry, stored bool) error
}

// entryQueuer is the first subscriber that is an EntryQueuer, or nil.
func (t *Tracker) entryQueuer() EntryQueuer {
	for _, s := range t.subs {
		if q, ok := s.(EntryQueuer); ok {
			return q
		}
	}
	return nil
}

// releaseJob moves a pending job to queued and hands it to the
// subscribers in order (release), leaving j as the store has it. It
// reports whether the job was released; false (and j read again) when a
// concurrent writer moved it first. A subscriber's error is logged, not
// returned: the job is queued in the store and Recover hands it on again.
func (t *Tracker) releaseJob(ctx context.Context, j *store.Job) (bool, error) {
	q := t.entryQueuer()
	if q == nil {
		ok, err := t.move(ctx, j, []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{})
		if ok {
			t.log.Info("job released", "runId", j.RunID, "jobId", j.ID, "job", j.JobName)
			t.logEnqueueError(j, t.release(ctx, j))
		}
		return ok, err
	}
	e := q.QueueEntry(j)
	row, stored, err := t.st.ReleaseJob(ctx, j.ID, e)
	if err != nil {
		return false, err
	}
	if row == nil {
		return false, t.refresh(ctx, j)
	}
	*j = *row
	t.log.Info("job released", "runId", j.RunID, "jobId", j.ID, "job", j.JobName)
	for _, s := range t.subs {
		if s == Subscriber(q) {
			err = q.JobQueued(ctx, j, e, stored)
		} else {
			err = s.JobReady(ctx, j)
		}
		if err != nil {
			t.logEnqueueError(j, err)
			break
		}
	}
	return true, nil
}

// logEnqueueError logs a subscriber's failure to take a released job.
func (t *Tracker) logEnqueueError(j *store.Job, err error) {
	if err != nil {
		t.log.Error("enqueue failed; job stays queued for recovery", "runId", j.RunID, "jobId", j.ID, "error", err)
	}
}
