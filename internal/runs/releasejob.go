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

// firstEntryQueuer is the first of subs that is an EntryQueuer, or nil.
func firstEntryQueuer(subs []Subscriber) EntryQueuer {
	for _, s := range subs {
		if q, ok := s.(EntryQueuer); ok {
			return q
		}
	}
	return nil
}

// storedEntry is a job's queue entry stored with its release, for the
// EntryQueuer that built it (release).
type storedEntry struct {
	by     EntryQueuer
	e      *store.QueueEntry
	stored bool
}

// releaseJob moves a pending job to queued and hands it to the
// subscribers in order (release), leaving j as the store has it. It
// reports whether the job was released; false (and j read again) when a
// concurrent writer moved it first. A subscriber's error is logged, not
// returned: the job is queued in the store and Recover hands it on again.
func (t *Tracker) releaseJob(ctx context.Context, j *store.Job) (bool, error) {
	var q *storedEntry
	if t.queuer == nil {
		ok, err := t.move(ctx, j, []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{})
		if !ok || err != nil {
			return ok, err
		}
	} else {
		q = &storedEntry{by: t.queuer, e: t.queuer.QueueEntry(j)}
		row, stored, err := t.st.ReleaseJob(ctx, j.ID, q.e)
		if err != nil {
			return false, err
		}
		if row == nil {
			return false, t.refresh(ctx, j)
		}
		*j, q.stored = *row, stored
	}
	t.log.Info("job released", "runId", j.RunID, "jobId", j.ID, "job", j.JobName)
	if err := t.release(ctx, j, q); err != nil {
		t.log.Error("enqueue failed; job stays queued for recovery", "runId", j.RunID, "jobId", j.ID, "error", err)
	}
	return true, nil
}
