package sqlstore

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
	if err := r.Scan(&c.JobID, &c.RunID, &c.SourceID, &c.Provider, &c.Repo, &c.SHA, &c.Name, &c.ExternalID, &c.DesiredState,
		&c.DesiredBody, &c.DesiredHash, &c.DesiredTerminal, tcol(&c.DesiredAt), &c.PostedState, &c.PostedHash, ntcol(&c.PostedAt),
		ntcol(&c.CreateAttemptedAt), &c.Attempts, ntcol(&c.NextAttemptAt), &c.GaveUpHash, &c.LastError, &c.LastStatusCode,
		tcol(&c.CreatedAt), tcol(&c.UpdatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &c, nil
}

// UpsertCheckRunDesired inserts c or updates its desired columns.
func (s *Store) UpsertCheckRunDesired(ctx context.Context, c *store.CheckRun) error {
	t := now()
	if c.DesiredAt.IsZero() {
		c.DesiredAt = t
	}
	_, err := s.exec(ctx, `INSERT INTO check_run_tracking (job_id, run_id, source_id, provider, repo, sha, name,
		desired_state, desired_body, desired_hash, desired_terminal, desired_at, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, desired_state = excluded.desired_state,
			desired_body = excluded.desired_body, desired_terminal = excluded.desired_terminal, desired_at = excluded.desired_at,
			attempts = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.attempts ELSE 0 END,
			next_attempt_at = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.next_attempt_at ELSE NULL END,
			desired_hash = excluded.desired_hash, updated_at = excluded.updated_at`,
		c.JobID, c.RunID, c.SourceID, c.Provider, c.Repo, c.SHA, c.Name, c.DesiredState, []byte(c.DesiredBody), c.DesiredHash, c.DesiredTerminal,
		s.d.ts(c.DesiredAt.UTC()), s.d.ts(t), s.d.ts(t))
	return mapErr(err)
}

// MarkCheckRunCreateAttempted sets create_attempted_at.
func (s *Store) MarkCheckRunCreateAttempted(ctx context.Context, jobID string, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE check_run_tracking SET create_attempted_at = ? WHERE job_id = ?`, s.d.ts(at), jobID)
	return affected(res, err)
}

// RecordCheckRunDelivery stores a delivery outcome.
func (s *Store) RecordCheckRunDelivery(ctx context.Context, jobID string, d store.CheckRunDelivery) error {
	at := s.d.ts(d.At.UTC())
	var res sql.Result
	var err error
	if d.OK {
		res, err = s.exec(ctx, `UPDATE check_run_tracking SET posted_state = ?, posted_hash = ?, posted_at = ?,
			external_id = CASE WHEN ? <> '' THEN ? ELSE external_id END, create_attempted_at = NULL, attempts = 0,
			next_attempt_at = NULL, last_error = '', last_status_code = 0, updated_at = ? WHERE job_id = ?`,
			d.State, d.Hash, at, d.ExternalID, d.ExternalID, at, jobID)
	} else {
		gaveUp := ""
		if d.GaveUp {
			gaveUp = d.Hash
		}
		res, err = s.exec(ctx, `UPDATE check_run_tracking SET attempts = attempts + 1, next_attempt_at = ?,
			gave_up_hash = CASE WHEN ? <> '' THEN ? ELSE gave_up_hash END, last_error = ?, last_status_code = ?, updated_at = ?
			WHERE job_id = ?`, s.d.tsPtr(d.NextAttemptAt), gaveUp, gaveUp, d.Err, d.StatusCode, at, jobID)
	}
	return affected(res, err)
}

// GetCheckRun returns a job's row, or ErrNotFound.
func (s *Store) GetCheckRun(ctx context.Context, jobID string) (*store.CheckRun, error) {
	return scanCheckRun(s.queryRow(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking WHERE job_id = ?`, jobID))
}

// ListCheckRuns returns rows matching f, oldest first.
func (s *Store) ListCheckRuns(ctx context.Context, f store.CheckRunFilter) ([]*store.CheckRun, error) {
	var c conds
	if f.SHA != "" {
		c.add("sha = ?", f.SHA)
	}
	if f.RunID != "" {
		c.add("run_id = ?", f.RunID)
	}
	if f.Open { // check_run_tracking_open_idx's WHERE, as written there
		c.add("(NOT desired_terminal OR posted_hash <> desired_hash) AND gave_up_hash <> desired_hash")
	}
	if f.DueAt != nil {
		// The terms of check_run_tracking_undelivered_idx's WHERE, as
		// written there: a partial index is used only when the query
		// repeats them.
		c.add("posted_hash <> desired_hash AND gave_up_hash <> desired_hash")
		c.add("(next_attempt_at IS NULL OR next_attempt_at <= ?)", s.d.ts(*f.DueAt))
	}
	rows, err := s.query(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking`+c.where()+`
		ORDER BY created_at, job_id LIMIT ?`, append(c.args, store.PageLimit(f.Limit, 500, 0))...)
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
	return insertEventLog(ctx, s.conn, e, true)
}

// DeleteCheckRunsBefore removes rows last updated before t.
func (s *Store) DeleteCheckRunsBefore(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM check_run_tracking WHERE updated_at < ?`, s.d.ts(t))
	if err != nil {
		return 0, mapErr(err)
	}
	return res.RowsAffected()
}
