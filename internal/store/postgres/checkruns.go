package postgres

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.CheckRunStore = (*Store)(nil)

const checkRunCols = `job_id, run_id, source_id, provider, repo, sha, name, external_id, desired_state, desired_body, desired_hash,
	desired_terminal, desired_at, posted_state, posted_hash, posted_at, create_attempted_at, attempts, next_attempt_at, gave_up_hash,
	last_error, last_status_code, created_at, updated_at`

func scanCheckRun(r scanner) (*store.CheckRun, error) {
	var c store.CheckRun
	var body []byte
	if err := r.Scan(&c.JobID, &c.RunID, &c.SourceID, &c.Provider, &c.Repo, &c.SHA, &c.Name, &c.ExternalID, &c.DesiredState,
		&body, &c.DesiredHash, &c.DesiredTerminal, &c.DesiredAt, &c.PostedState, &c.PostedHash, &c.PostedAt, &c.CreateAttemptedAt,
		&c.Attempts, &c.NextAttemptAt, &c.GaveUpHash, &c.LastError, &c.LastStatusCode, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, mapErr(err)
	}
	c.DesiredBody = body
	c.DesiredAt, c.CreatedAt, c.UpdatedAt = c.DesiredAt.UTC(), c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	for _, p := range []**time.Time{&c.PostedAt, &c.CreateAttemptedAt, &c.NextAttemptAt} {
		if *p != nil {
			u := (*p).UTC()
			*p = &u
		}
	}
	return &c, nil
}

// UpsertCheckRunDesired inserts c or updates its desired columns.
func (s *Store) UpsertCheckRunDesired(ctx context.Context, c *store.CheckRun) error {
	t := now()
	if c.DesiredAt.IsZero() {
		c.DesiredAt = t
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO check_run_tracking (job_id, run_id, source_id, provider, repo, sha, name,
		desired_state, desired_body, desired_hash, desired_terminal, desired_at, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$13)
		ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, desired_state = excluded.desired_state,
			desired_body = excluded.desired_body, desired_terminal = excluded.desired_terminal, desired_at = excluded.desired_at,
			attempts = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.attempts ELSE 0 END,
			next_attempt_at = CASE WHEN check_run_tracking.desired_hash = excluded.desired_hash THEN check_run_tracking.next_attempt_at ELSE NULL END,
			desired_hash = excluded.desired_hash, updated_at = excluded.updated_at`,
		c.JobID, c.RunID, c.SourceID, c.Provider, c.Repo, c.SHA, c.Name, c.DesiredState, []byte(c.DesiredBody), c.DesiredHash,
		c.DesiredTerminal, ts(c.DesiredAt), t)
	return mapErr(err)
}

// MarkCheckRunCreateAttempted sets create_attempted_at.
func (s *Store) MarkCheckRunCreateAttempted(ctx context.Context, jobID string, at time.Time) error {
	return affected(s.pool.Exec(ctx, `UPDATE check_run_tracking SET create_attempted_at = $1 WHERE job_id = $2`, ts(at), jobID))
}

// RecordCheckRunDelivery stores a delivery outcome.
func (s *Store) RecordCheckRunDelivery(ctx context.Context, jobID string, d store.CheckRunDelivery) error {
	at := ts(d.At)
	if d.OK {
		return affected(s.pool.Exec(ctx, `UPDATE check_run_tracking SET posted_state = $1, posted_hash = $2, posted_at = $3,
			external_id = CASE WHEN $4 <> '' THEN $4 ELSE external_id END, create_attempted_at = NULL, attempts = 0,
			next_attempt_at = NULL, last_error = '', last_status_code = 0, updated_at = $3 WHERE job_id = $5`,
			d.State, d.Hash, at, d.ExternalID, jobID))
	}
	gaveUp := ""
	if d.GaveUp {
		gaveUp = d.Hash
	}
	return affected(s.pool.Exec(ctx, `UPDATE check_run_tracking SET attempts = attempts + 1, next_attempt_at = $1,
		gave_up_hash = CASE WHEN $2 <> '' THEN $2 ELSE gave_up_hash END, last_error = $3, last_status_code = $4, updated_at = $5
		WHERE job_id = $6`, tsPtr(d.NextAttemptAt), gaveUp, d.Err, d.StatusCode, at, jobID))
}

// GetCheckRun returns a job's row, or ErrNotFound.
func (s *Store) GetCheckRun(ctx context.Context, jobID string) (*store.CheckRun, error) {
	return scanCheckRun(s.pool.QueryRow(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking WHERE job_id = $1`, jobID))
}

// ListCheckRuns returns rows matching f, oldest first.
func (s *Store) ListCheckRuns(ctx context.Context, f store.CheckRunFilter) ([]*store.CheckRun, error) {
	var due any
	if f.DueAt != nil {
		due = ts(*f.DueAt)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+checkRunCols+` FROM check_run_tracking
		WHERE ($1 = '' OR sha = $1) AND ($2 = '' OR run_id = $2)
		  AND (NOT $3 OR ((NOT desired_terminal OR posted_hash <> desired_hash) AND gave_up_hash <> desired_hash))
		  AND ($4::timestamptz IS NULL OR (posted_hash <> desired_hash AND gave_up_hash <> desired_hash AND (next_attempt_at IS NULL OR next_attempt_at <= $4::timestamptz)))
		ORDER BY created_at, job_id LIMIT $5`,
		f.SHA, f.RunID, f.Open, due, store.PageLimit(f.Limit, 500, 0))
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
	return insertEventLog(ctx, s.pool, e, true)
}

// DeleteCheckRunsBefore removes rows last updated before t.
func (s *Store) DeleteCheckRunsBefore(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM check_run_tracking WHERE updated_at < $1`, ts(t))
	if err != nil {
		return 0, mapErr(err)
	}
	return tag.RowsAffected(), nil
}
