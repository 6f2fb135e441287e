package postgres

import (
	"context"

	"kici.dev/kici/internal/store"
)

var _ store.RunControlStore = (*Store)(nil)

const concurrencyCols = `run_id, scope, group_key, status, max_active, cancel_in_progress, created_at`

func scanConcurrency(r scanner) (*store.ConcurrencyEntry, error) {
	var e store.ConcurrencyEntry
	if err := r.Scan(&e.RunID, &e.Scope, &e.Group, &e.Status, &e.Max, &e.CancelInProgress, &e.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return &e, nil
}

// InsertConcurrencyEntry inserts e; ErrConflict when the run has an entry.
func (s *Store) InsertConcurrencyEntry(ctx context.Context, e *store.ConcurrencyEntry) error {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	e.CreatedAt = ts(e.CreatedAt)
	_, err := s.pool.Exec(ctx, `INSERT INTO concurrency_entries (`+concurrencyCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
		e.RunID, e.Scope, e.Group, e.Status, e.Max, e.CancelInProgress, e.CreatedAt)
	return mapErr(err)
}

// GetConcurrencyEntry returns a run's entry, or ErrNotFound.
func (s *Store) GetConcurrencyEntry(ctx context.Context, runID string) (*store.ConcurrencyEntry, error) {
	return scanConcurrency(s.pool.QueryRow(ctx, `SELECT `+concurrencyCols+` FROM concurrency_entries WHERE run_id = $1`, runID))
}

// ListConcurrencyEntries returns a group's entries in statuses, oldest first.
func (s *Store) ListConcurrencyEntries(ctx context.Context, scope, group string, statuses []string) ([]*store.ConcurrencyEntry, error) {
	if statuses == nil {
		statuses = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+concurrencyCols+` FROM concurrency_entries
		WHERE (($1 = '' AND $2 = '') OR (scope = $1 AND group_key = $2))
		  AND (cardinality($3::text[]) = 0 OR status = ANY($3::text[]))
		ORDER BY created_at, run_id`, scope, group, statuses)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.ConcurrencyEntry
	for rows.Next() {
		e, err := scanConcurrency(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, mapErr(rows.Err())
}

// SetConcurrencyStatus moves a run's entry to `to` if its status is in from.
func (s *Store) SetConcurrencyStatus(ctx context.Context, runID string, from []string, to string) (bool, error) {
	if from == nil {
		from = []string{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE concurrency_entries SET status = $1 WHERE run_id = $2 AND status = ANY($3::text[])`, to, runID, from)
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() > 0, nil
}

// InsertRunLink records a rerun link; ErrConflict / ErrNotFound as documented.
func (s *Store) InsertRunLink(ctx context.Context, l *store.RunLink) error {
	if l.CreatedAt.IsZero() {
		l.CreatedAt = now()
	}
	l.CreatedAt = ts(l.CreatedAt)
	_, err := s.pool.Exec(ctx, `INSERT INTO run_links (run_id, parent_run_id, original_run_id, created_at) VALUES ($1,$2,$3,$4)`,
		l.RunID, l.ParentRunID, l.OriginalRunID, l.CreatedAt)
	return mapErr(err)
}

// GetRunLink returns a rerun's link, or ErrNotFound.
func (s *Store) GetRunLink(ctx context.Context, runID string) (*store.RunLink, error) {
	var l store.RunLink
	err := s.pool.QueryRow(ctx, `SELECT run_id, parent_run_id, original_run_id, created_at FROM run_links WHERE run_id = $1`, runID).
		Scan(&l.RunID, &l.ParentRunID, &l.OriginalRunID, &l.CreatedAt)
	if err != nil {
		return nil, mapErr(err)
	}
	l.CreatedAt = l.CreatedAt.UTC()
	return &l, nil
}
