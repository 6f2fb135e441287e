package sqlite

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.BlobIndexStore = (*Store)(nil)

const cacheCols = `id, org_id, scope, cache_key, blob_key, size_bytes, sha256, job_id, created_at, last_used_at`

func scanCache(r scanner) (*store.CacheEntry, error) {
	var e store.CacheEntry
	var created, used int64
	if err := r.Scan(&e.ID, &e.OrgID, &e.Scope, &e.Key, &e.BlobKey, &e.SizeBytes, &e.SHA256, &e.JobID, &created, &used); err != nil {
		return nil, mapErr(err)
	}
	e.CreatedAt, e.LastUsedAt = time.UnixMilli(created).UTC(), time.UnixMilli(used).UTC()
	return &e, nil
}

// InsertCacheEntry records e; ErrConflict when its key exists in its scope.
func (s *Store) InsertCacheEntry(ctx context.Context, e *store.CacheEntry) error {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now()
	}
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Millisecond)
	if e.LastUsedAt.IsZero() {
		e.LastUsedAt = e.CreatedAt
	}
	e.LastUsedAt = e.LastUsedAt.UTC().Truncate(time.Millisecond)
	_, err := s.db.ExecContext(ctx, `INSERT INTO cache_entries (`+cacheCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		e.ID, e.OrgID, e.Scope, e.Key, e.BlobKey, e.SizeBytes, e.SHA256, e.JobID, ms(e.CreatedAt), ms(e.LastUsedAt))
	return mapErr(err)
}

// FindCacheEntry returns the exact entry, or the newest with the prefix.
func (s *Store) FindCacheEntry(ctx context.Context, orgID, scope, key string, prefix bool) (*store.CacheEntry, error) {
	if !prefix {
		return scanCache(s.db.QueryRowContext(ctx, `SELECT `+cacheCols+` FROM cache_entries
			WHERE org_id = ? AND scope = ? AND cache_key = ?`, orgID, scope, key))
	}
	return scanCache(s.db.QueryRowContext(ctx, `SELECT `+cacheCols+` FROM cache_entries
		WHERE org_id = ? AND scope = ? AND substr(cache_key, 1, length(?)) = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, orgID, scope, key, key))
}

// TouchCacheEntry sets an entry's last use.
func (s *Store) TouchCacheEntry(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE cache_entries SET last_used_at = ? WHERE id = ?`, ms(at.UTC()), id)
	return mapErr(err)
}

// ListCacheEntries returns entries least recently used first.
func (s *Store) ListCacheEntries(ctx context.Context, orgID string) ([]*store.CacheEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+cacheCols+` FROM cache_entries
		WHERE ? = '' OR org_id = ? ORDER BY last_used_at, created_at, id`, orgID, orgID)
	if err != nil {
		return nil, mapErr(err)
	}
	return collect(rows, scanCache)
}

// DeleteCacheEntry removes an entry.
func (s *Store) DeleteCacheEntry(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM cache_entries WHERE id = ?`, id)
	return mapErr(err)
}

const artifactCols = `id, org_id, run_id, job_id, job_name, name, blob_key, size_bytes, sha256, created_at, expires_at`

func scanArtifact(r scanner) (*store.Artifact, error) {
	var a store.Artifact
	var created, expires int64
	if err := r.Scan(&a.ID, &a.OrgID, &a.RunID, &a.JobID, &a.JobName, &a.Name, &a.BlobKey, &a.SizeBytes, &a.SHA256, &created, &expires); err != nil {
		return nil, mapErr(err)
	}
	a.CreatedAt, a.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
	return &a, nil
}

// InsertArtifact records a within the limits, in one statement (SQLite
// runs one writer at a time, so the checks and the insert are atomic).
func (s *Store) InsertArtifact(ctx context.Context, a *store.Artifact, maxPerRun int, quotaBytes int64) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	a.CreatedAt = a.CreatedAt.UTC().Truncate(time.Millisecond)
	a.ExpiresAt = a.ExpiresAt.UTC().Truncate(time.Millisecond)
	if _, err := s.GetArtifact(ctx, a.RunID, a.Name); err == nil {
		return store.ErrConflict
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO run_artifacts (`+artifactCols+`)
		SELECT ?,?,?,?,?,?,?,?,?,?,?
		WHERE (? <= 0 OR (SELECT count(*) FROM run_artifacts WHERE run_id = ?) < ?)
		  AND (? <= 0 OR (SELECT coalesce(sum(size_bytes), 0) FROM run_artifacts WHERE org_id = ?) + ? <= ?)`,
		a.ID, a.OrgID, a.RunID, a.JobID, a.JobName, a.Name, a.BlobKey, a.SizeBytes, a.SHA256, ms(a.CreatedAt), ms(a.ExpiresAt),
		maxPerRun, a.RunID, maxPerRun, quotaBytes, a.OrgID, a.SizeBytes, quotaBytes)
	if err != nil {
		return mapErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrLimit
	}
	return nil
}

// GetArtifact returns a run's artifact by name.
func (s *Store) GetArtifact(ctx context.Context, runID, name string) (*store.Artifact, error) {
	return scanArtifact(s.db.QueryRowContext(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE run_id = ? AND name = ?`, runID, name))
}

// ListArtifacts returns a run's artifacts, oldest first.
func (s *Store) ListArtifacts(ctx context.Context, runID string) ([]*store.Artifact, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE run_id = ? ORDER BY created_at, name`, runID)
	if err != nil {
		return nil, mapErr(err)
	}
	return collect(rows, scanArtifact)
}

// ArtifactUsage returns an org's artifact count and bytes.
func (s *Store) ArtifactUsage(ctx context.Context, orgID string) (int, int64, error) {
	var n int
	var b int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(size_bytes), 0) FROM run_artifacts WHERE org_id = ?`, orgID).Scan(&n, &b)
	return n, b, mapErr(err)
}

// ListExpiredArtifacts returns artifacts that expired before t.
func (s *Store) ListExpiredArtifacts(ctx context.Context, t time.Time, limit int) ([]*store.Artifact, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE expires_at < ? ORDER BY expires_at, id LIMIT ?`, ms(t.UTC()), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	return collect(rows, scanArtifact)
}

// DeleteArtifact removes an artifact row.
func (s *Store) DeleteArtifact(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM run_artifacts WHERE id = ?`, id)
	return mapErr(err)
}

// SetJobCredential records a job's current credential hash.
func (s *Store) SetJobCredential(ctx context.Context, jobID, tokenHash string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO job_credentials (job_id, token_hash, created_at) VALUES (?,?,?)
		ON CONFLICT (job_id) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at`,
		jobID, tokenHash, ms(now()))
	return mapErr(err)
}

// JobForCredential returns the job of a credential hash.
func (s *Store) JobForCredential(ctx context.Context, tokenHash string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT job_id FROM job_credentials WHERE token_hash = ?`, tokenHash).Scan(&id)
	return id, mapErr(err)
}
