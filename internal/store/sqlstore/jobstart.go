package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// StartJob moves a job and its run to running (store.Store). A job's
// start was two writes, the job's move and then its run's (a no-op for
// every job of a run but the first): two round trips on PostgreSQL, two
// commits on SQLite. On PostgreSQL it is now one statement, the job's
// UPDATE and the run's as data-modifying WITH queries, the run's naming
// its run through the job's returned row, so that a job that did not move
// starts no run. On SQLite it is one transaction of both.
//
// The run keeps a start time it has: a run held after it ran (an approval
// gate) and released by a job's start still started when it first did.
func (s *Store) StartJob(ctx context.Context, id string, u store.JobUpdate, runStarted time.Time) (*store.Job, error) {
	move, moveArgs := s.jobUpdate(id, status.JobsMovingTo(status.JobRunning), status.JobRunning, u)
	if s.d.Postgres {
		start, startArgs := s.runStart("id IN (SELECT run_id FROM m)", nil, runStarted)
		return moved(scanJob(s.queryRow(ctx, `WITH m AS (`+move+` RETURNING `+jobSelectCols+`),
			r AS (`+start+`)
			SELECT m.* FROM m`, append(moveArgs, startArgs...)...)))
	}
	var job *store.Job
	err := s.tx(ctx, func(c conn) error {
		var err error
		job, err = moved(scanJob(c.queryRow(ctx, move+` RETURNING `+jobSelectCols, moveArgs...)))
		if err != nil || job == nil {
			return err
		}
		start, startArgs := s.runStart("id = ?", []any{job.RunID}, runStarted)
		_, err = c.exec(ctx, start, startArgs...)
		return mapErr(err)
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// runStart is the conditional UPDATE that moves the run idCond selects
// (with its arguments idArgs: a run id, or a subquery) to running from
// the statuses that can move there, setting its start time to at where it
// has none.
func (s *Store) runStart(idCond string, idArgs []any, at time.Time) (string, []any) {
	cond, condArgs := statusCond(status.RunsMovingTo(status.RunRunning), store.TerminalRunStatuses)
	args := append([]any{string(status.RunRunning), s.d.ts(at)}, idArgs...)
	return `UPDATE execution_runs SET status = ?, started_at = COALESCE(started_at, ?)
		WHERE ` + idCond + ` AND ` + cond, append(args, condArgs...)
}
