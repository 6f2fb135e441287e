package sqlite

import (
	"context"
	"database/sql"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.CheckRunStore = (*Store)(nil)

const checkRunCols = `job_id, run_id, source_id, provider, repo, sha, name, external_id, desired_state, desired_body, desired_hash,
	desired_terminal, desired_at, posted_state, posted_hash, posted_at, create_attempted_at, attempts, next_attempt_at, gave_up_hash,
	last_error, last_status_code, created_at, updated_at`

func scanCheckRun(r scanner) (*store.CheckRun, error) {
	var c store.CheckRun
	var term int
	var desiredAt, created, updated int64
	var posted, attempted, next sql.NullInt64
	if err := r.Scan(&c.JobID, &c.RunID, &c.SourceID, &c.Provider, &c.Repo, &c.SHA, &c.Name, &c.ExternalID, &c.DesiredState,
		&c.DesiredBody, &c.DesiredHash, &term, &desiredAt, &c.PostedState, &c.PostedHash, &posted, &attempted, &c.Attempts, &next,
		&c.GaveUpHash, &c.LastError, &c.LastStatusCode, &created, &updated); err != nil {
		return nil, mapErr(err)
	}
	c.DesiredTerminal = term != 0
	c.DesiredAt = time.UnixMilli(desiredAt).UTC()
	c.PostedAt, c.CreateAttemptedAt, c.NextAttemptAt = fromMs(posted), fromMs(attempted), fromMs(next)
	c.CreatedAt, c.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &c, nil
}

// UpsertCheckRunDesired inserts c or updates its desired columns.
func (s *Store) UpsertCheckRunDesired(ctx context.Context, c *store.CheckRun) error {
	t := now()
	if c.DesiredAt.IsZero() {
		c.DesiredAt = t
	}
	term := 0
	if c.DesiredTerminal {
		term = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO check_run_tracking (job_id, run_id, source_id, provider, repo, sha, name,
		desired_state, desired_body, desired_hash, desired_terminal, desired_at, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, desired_state = excluded.desired_state,
			desired_body = excluded.desired_body, desired_terminal = excluded.desired_terminal, desired_at = excluded.desired_at,
			attempts = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.attempts ELSE 0 END,
			next_attempt_at = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.next_attempt_at ELSE NULL END,
			desired_hash = excluded.desired_hash, updated_at = excluded.updated_at`,
		c.JobID, c.RunID, c.SourceID, c.Provider, c.Repo, c.SHA, c.Name, c.DesiredState, []byte(c.DesiredBody), c.DesiredHash, term,
		ms(c.DesiredAt.UTC()), ms(t), ms(t))
	return mapErr(err)
}

// MarkCheckRunCreateAttempted sets create_attempted_at.
func (s *Store) MarkCheckRunCreateAttempted(ctx context.Context, jobID string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE check_run_tracking SET create_attempted_at = ? WHERE job_id = ?`, ms(at), jobID)
	return affected(res, err)
}

// RecordCheckRunDelivery stores a delivery outcome.
func (s *Store) RecordCheckRunDelivery(ctx context.Context, jobID string, d store.CheckRunDelivery) error {
	at := ms(d.At.UTC())
	var res sql.Result
	var err error
	if d.OK {
		res, err = s.db.ExecContext(ctx, `UPDATE check_run_tracking SET posted_state = ?, posted_hash = ?, posted_at = ?,
			external_id = CASE WHEN ? <> '' THEN ? ELSE external_id END, create_attempted_at = NULL, attempts = 0,
			next_attempt_at = NULL, last_error = '', last_status_code = 0, updated_at = ? WHERE job_id = ?`,
			d.State, d.Hash, at, d.ExternalID, d.ExternalID, at, jobID)
	} else {
		gaveUp := ""
		if d.GaveUp {
			gaveUp = d.Hash
		}
		res, err = s.db.ExecContext(ctx, `UPDATE check_run_tracking SET attempts = attempts + 1, next_attempt_at = ?,
			gave_up_hash = CASE WHEN ? <> '' THEN ? ELSE gave_up_hash END, last_error = ?, last_status_code = ?, updated_at = ?
			WHERE job_id = ?`, msPtr(d.NextAttemptAt), gaveUp, gaveUp, d.Err, d.StatusCode, at, jobID)
	}
	return affected(res, err)
}

// GetCheckRun returns a job's row, or ErrNotFound.
func (s *Store) GetCheckRun(ctx context.Context, jobID string) (*store.CheckRun, error) {
	return scanCheckRun(s.db.QueryRowContext(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking WHERE job_id = ?`, jobID))
}

// ListCheckRuns returns rows matching f, oldest first.
func (s *Store) ListCheckRuns(ctx context.Context, f store.CheckRunFilter) ([]*store.CheckRun, error) {
	var due any
	if f.DueAt != nil {
		due = ms(*f.DueAt)
	}
	open := 0
	if f.Open {
		open = 1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking
		WHERE (? = '' OR sha = ?) AND (? = '' OR run_id = ?)
		  AND (? = 0 OR ((desired_terminal = 0 OR posted_hash <> desired_hash) AND gave_up_hash <> desired_hash))
		  AND (? IS NULL OR (posted_hash <> desired_hash AND gave_up_hash <> desired_hash AND (next_attempt_at IS NULL OR next_attempt_at <= ?)))
		ORDER BY created_at, job_id LIMIT ?`,
		f.SHA, f.SHA, f.RunID, f.RunID, open, due, due, store.PageLimit(f.Limit, 500, 0))
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.CheckRun
	for rows.Next() {
		c, err := scanCheckRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}

// RecordCheckRunFailure inserts a primary event-log entry for a failed
// forge delivery; ErrConflict when its delivery id exists.
func (s *Store) RecordCheckRunFailure(ctx context.Context, e *store.EventLogEntry) error {
	return insertEventLog(ctx, s.db, e, true)
}

// DeleteCheckRunsBefore removes rows last updated before t.
func (s *Store) DeleteCheckRunsBefore(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM check_run_tracking WHERE updated_at < ?`, ms(t))
	if err != nil {
		return 0, mapErr(err)
	}
	return res.RowsAffected()
}
