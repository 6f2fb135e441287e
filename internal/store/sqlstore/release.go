package sqlstore

import (
	"context"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// ReleaseJob moves a pending job to queued and stores its queue entry
// (store.Store). On PostgreSQL it is one statement: the UPDATE and the
// INSERT as data-modifying WITH queries, the INSERT fed by the UPDATE's
// row so that nothing is queued for a job that was not pending; a
// release was two round trips before (MoveJob, then Enqueue). On SQLite
// it is one transaction of both.
func (s *Store) ReleaseJob(ctx context.Context, id string, e *store.QueueEntry) (*store.Job, bool, error) {
	move, moveArgs := s.jobUpdate(id, []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{})
	insert, insertArgs, err := s.queueInsert(e)
	if err != nil {
		return nil, false, err
	}
	var stored bool
	if s.d.Postgres {
		job, err := moved(scanJob(trailing{s.queryRow(ctx, `WITH m AS (`+move+` RETURNING `+jobSelectCols+`),
			q AS (INSERT INTO dispatch_queue (`+queueCols+`) SELECT `+queueValuesPG+` FROM m ON CONFLICT (id) DO NOTHING RETURNING id)
			SELECT m.*, EXISTS (SELECT 1 FROM q) FROM m`, append(moveArgs, insertArgs...)...), []any{&stored}}))
		return job, stored, err
	}
	var job *store.Job
	err = s.tx(ctx, func(c conn) error {
		var err error
		job, err = moved(scanJob(c.queryRow(ctx, move+` RETURNING `+jobSelectCols, moveArgs...)))
		if err != nil || job == nil {
			return err
		}
		res, err := c.exec(ctx, insert+` ON CONFLICT (id) DO NOTHING`, insertArgs...)
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		stored = n == 1
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return job, stored, nil
}
