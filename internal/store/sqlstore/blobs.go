package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.BlobIndexStore = (*Store)(nil)

const cacheCols = `id, org_id, scope, cache_key, blob_key, size_bytes, sha256, job_id, created_at, last_used_at`

func scanCache(r scanner) (*store.CacheEntry, error) {
	var e store.CacheEntry
	if err := r.Scan(&e.ID, &e.OrgID, &e.Scope, &e.Key, &e.BlobKey, &e.SizeBytes, &e.SHA256, &e.JobID, tcol(&e.CreatedAt), tcol(&e.LastUsedAt)); err != nil {
		return nil, mapErr(err)
	}
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
	_, err := s.exec(ctx, `INSERT INTO cache_entries (`+cacheCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		e.ID, e.OrgID, e.Scope, e.Key, e.BlobKey, e.SizeBytes, e.SHA256, e.JobID, s.d.ts(e.CreatedAt), s.d.ts(e.LastUsedAt))
	return mapErr(err)
}

// FindCacheEntry returns the exact entry, or the newest with the prefix.
func (s *Store) FindCacheEntry(ctx context.Context, orgID, scope, key string, prefix bool) (*store.CacheEntry, error) {
	if !prefix {
		return scanCache(s.queryRow(ctx, `SELECT `+cacheCols+` FROM cache_entries
			WHERE org_id = ? AND scope = ? AND cache_key = ?`, orgID, scope, key))
	}
	return scanCache(s.queryRow(ctx, `SELECT `+cacheCols+` FROM cache_entries
		WHERE org_id = ? AND scope = ? AND substr(cache_key, 1, length(?)) = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, orgID, scope, key, key))
}

// TouchCacheEntry sets an entry's last use.
func (s *Store) TouchCacheEntry(ctx context.Context, id string, at time.Time) error {
	_, err := s.exec(ctx, `UPDATE cache_entries SET last_used_at = ? WHERE id = ?`, s.d.ts(at.UTC()), id)
	return mapErr(err)
}

// ListCacheEntries returns entries least recently used first.
func (s *Store) ListCacheEntries(ctx context.Context, orgID string) ([]*store.CacheEntry, error) {
	rows, err := s.query(ctx, `SELECT `+cacheCols+` FROM cache_entries
		WHERE ? = '' OR org_id = ? ORDER BY last_used_at, created_at, id`, orgID, orgID)
	return collect(rows, mapErr(err), scanCache)
}

// DeleteCacheEntry removes an entry.
func (s *Store) DeleteCacheEntry(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `DELETE FROM cache_entries WHERE id = ?`, id)
	return mapErr(err)
}

const artifactCols = `id, org_id, run_id, job_id, job_name, name, blob_key, size_bytes, sha256, created_at, expires_at`

func scanArtifact(r scanner) (*store.Artifact, error) {
	var a store.Artifact
	if err := r.Scan(&a.ID, &a.OrgID, &a.RunID, &a.JobID, &a.JobName, &a.Name, &a.BlobKey, &a.SizeBytes, &a.SHA256, tcol(&a.CreatedAt), tcol(&a.ExpiresAt)); err != nil {
		return nil, mapErr(err)
	}
	return &a, nil
}

// InsertArtifact records a within the limits, in one transaction that
// serialises concurrent inserts of the org (an advisory lock on PostgreSQL,
// the database write lock on SQLite), so two uploads cannot both pass the
// same remaining quota.
func (s *Store) InsertArtifact(ctx context.Context, a *store.Artifact, maxPerRun int, quotaBytes int64) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	a.CreatedAt = a.CreatedAt.UTC().Truncate(time.Millisecond)
	a.ExpiresAt = a.ExpiresAt.UTC().Truncate(time.Millisecond)
	return mapErr(s.tx(ctx, func(tx conn) error {
		if s.d.Postgres {
			if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('run_artifacts:' || ?))`, a.OrgID); err != nil {
				return err
			}
		}
		var exists bool
		if err := tx.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_artifacts WHERE run_id = ? AND name = ?)`, a.RunID, a.Name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return store.ErrConflict
		}
		res, err := tx.exec(ctx, `INSERT INTO run_artifacts (`+artifactCols+`)
			SELECT ?1,?2,?3,?4,?5,?6,?7,?8::bigint,?9,?10,?11
			WHERE (?12::int <= 0 OR (SELECT count(*) FROM run_artifacts WHERE run_id = ?3) < ?12::int)
			  AND (?13::bigint <= 0 OR (SELECT coalesce(sum(size_bytes), 0) FROM run_artifacts WHERE org_id = ?2) + ?8::bigint <= ?13::bigint)`,
			a.ID, a.OrgID, a.RunID, a.JobID, a.JobName, a.Name, a.BlobKey, a.SizeBytes, a.SHA256, s.d.ts(a.CreatedAt),
			s.d.ts(a.ExpiresAt), maxPerRun, quotaBytes)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrLimit
		}
		return nil
	}))
}

// GetArtifact returns a run's artifact by name.
func (s *Store) GetArtifact(ctx context.Context, runID, name string) (*store.Artifact, error) {
	return scanArtifact(s.queryRow(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE run_id = ? AND name = ?`, runID, name))
}

// ListArtifacts returns a run's artifacts, oldest first.
func (s *Store) ListArtifacts(ctx context.Context, runID string) ([]*store.Artifact, error) {
	rows, err := s.query(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE run_id = ? ORDER BY created_at, name`, runID)
	return collect(rows, mapErr(err), scanArtifact)
}

// ArtifactUsage returns an org's artifact count and bytes.
func (s *Store) ArtifactUsage(ctx context.Context, orgID string) (int, int64, error) {
	var n int
	var b int64
	err := s.queryRow(ctx, `SELECT count(*), coalesce(sum(size_bytes), 0)::bigint FROM run_artifacts WHERE org_id = ?`, orgID).Scan(&n, &b)
	return n, b, mapErr(err)
}

// ListExpiredArtifacts returns artifacts that expired before t.
func (s *Store) ListExpiredArtifacts(ctx context.Context, t time.Time, limit int) ([]*store.Artifact, error) {
	rows, err := s.query(ctx, `SELECT `+artifactCols+` FROM run_artifacts WHERE expires_at < ? ORDER BY expires_at, id LIMIT ?`, s.d.ts(t.UTC()), limit)
	return collect(rows, mapErr(err), scanArtifact)
}

// DeleteArtifact removes an artifact row.
func (s *Store) DeleteArtifact(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `DELETE FROM run_artifacts WHERE id = ?`, id)
	return mapErr(err)
}

// SetJobCredential records a job's current credential hash.
func (s *Store) SetJobCredential(ctx context.Context, jobID, tokenHash string) error {
	_, err := s.exec(ctx, `INSERT INTO job_credentials (job_id, token_hash, created_at) VALUES (?,?,?)
		ON CONFLICT (job_id) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at`,
		jobID, tokenHash, s.d.ts(now()))
	return mapErr(err)
}

// JobForCredential returns the job of a credential hash.
func (s *Store) JobForCredential(ctx context.Context, tokenHash string) (string, error) {
	var id string
	err := s.queryRow(ctx, `SELECT job_id FROM job_credentials WHERE token_hash = ?`, tokenHash).Scan(&id)
	return id, mapErr(err)
}
