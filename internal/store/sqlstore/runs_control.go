package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.RunControlStore = (*Store)(nil)

const concurrencyCols = `run_id, scope, group_key, status, max_active, cancel_in_progress, created_at`

func scanConcurrency(r scanner) (*store.ConcurrencyEntry, error) {
	var e store.ConcurrencyEntry
	if err := r.Scan(&e.RunID, &e.Scope, &e.Group, &e.Status, &e.Max, &e.CancelInProgress, tcol(&e.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &e, nil
}

// InsertConcurrencyEntry inserts e; ErrConflict when the run has an entry.
func (s *Store) InsertConcurrencyEntry(ctx context.Context, e *store.ConcurrencyEntry) error {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Millisecond)
	_, err := s.exec(ctx, `INSERT INTO concurrency_entries (`+concurrencyCols+`) VALUES (?,?,?,?,?,?,?)`,
		e.RunID, e.Scope, e.Group, e.Status, e.Max, e.CancelInProgress, s.d.ts(e.CreatedAt))
	return mapErr(err)
}

// GetConcurrencyEntry returns a run's entry, or ErrNotFound.
func (s *Store) GetConcurrencyEntry(ctx context.Context, runID string) (*store.ConcurrencyEntry, error) {
	return scanConcurrency(s.queryRow(ctx, `SELECT `+concurrencyCols+` FROM concurrency_entries WHERE run_id = ?`, runID))
}

// ListConcurrencyEntries returns a group's entries in statuses, oldest first.
func (s *Store) ListConcurrencyEntries(ctx context.Context, scope, group string, statuses []string) ([]*store.ConcurrencyEntry, error) {
	var c conds
	if scope != "" || group != "" {
		c.add("scope = ? AND group_key = ?", scope, group)
	}
	if len(statuses) > 0 {
		cond, args := inList("status", statuses, false)
		c.add(cond, args...)
	}
	rows, err := s.query(ctx, `SELECT `+concurrencyCols+` FROM concurrency_entries`+c.where()+`
		ORDER BY created_at, run_id`, c.args...)
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
	cond, args := inList("status", from, false)
	res, err := s.exec(ctx, `UPDATE concurrency_entries SET status = ? WHERE run_id = ? AND `+cond,
		append([]any{to, runID}, args...)...)
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n > 0, mapErr(err)
}

// InsertRunLink records a rerun link; ErrConflict / ErrNotFound as documented.
func (s *Store) InsertRunLink(ctx context.Context, l *store.RunLink) error {
	if l.CreatedAt.IsZero() {
		l.CreatedAt = now()
	}
	l.CreatedAt = l.CreatedAt.UTC().Truncate(time.Millisecond)
	_, err := s.exec(ctx, `INSERT INTO run_links (run_id, parent_run_id, original_run_id, created_at) VALUES (?,?,?,?)`,
		l.RunID, l.ParentRunID, l.OriginalRunID, s.d.ts(l.CreatedAt))
	return mapErr(err)
}

// GetRunLink returns a rerun's link, or ErrNotFound.
func (s *Store) GetRunLink(ctx context.Context, runID string) (*store.RunLink, error) {
	var l store.RunLink
	err := s.queryRow(ctx, `SELECT run_id, parent_run_id, original_run_id, created_at FROM run_links WHERE run_id = ?`, runID).
		Scan(&l.RunID, &l.ParentRunID, &l.OriginalRunID, tcol(&l.CreatedAt))
	if err != nil {
		return nil, mapErr(err)
	}
	return &l, nil
}

// ListRerunsOf returns the links of parentRunID's direct reruns, oldest
// first (index run_links_parent).
func (s *Store) ListRerunsOf(ctx context.Context, parentRunID string, limit int) ([]*store.RunLink, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.query(ctx, `SELECT run_id, parent_run_id, original_run_id, created_at FROM run_links
		WHERE parent_run_id = ? ORDER BY created_at, run_id LIMIT ?`, parentRunID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.RunLink
	for rows.Next() {
		var l store.RunLink
		if err := rows.Scan(&l.RunID, &l.ParentRunID, &l.OriginalRunID, tcol(&l.CreatedAt)); err != nil {
			return nil, err
		}
		out = append(out, &l)
	}
	return out, rows.Err()
}
