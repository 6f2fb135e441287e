package store

import (
	"context"
	"errors"
	"time"
)

// ErrLimit is returned when an insert would pass a count or size limit.
var ErrLimit = errors.New("store: limit reached")

// CacheEntry indexes one saved job cache (the blob holds a tar+zstd of the
// cache's paths). Scope is where it may be read from: "<repo>@<branch>";
// Key is the expanded cache key. (OrgID, Scope, Key) is unique: a cache,
// once saved, is immutable.
type CacheEntry struct {
	ID        string `json:"id"`
	OrgID     string `json:"orgId"`
	Scope     string `json:"scope"`
	Key       string `json:"key"`
	BlobKey   string `json:"-"`
	SizeBytes int64  `json:"sizeBytes"`
	SHA256    string `json:"sha256"`
	// JobID is the job that saved it.
	JobID      string    `json:"jobId"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// Artifact indexes one file set a job uploaded (the blob holds a tar+zstd).
// (RunID, Name) is unique.
type Artifact struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"orgId"`
	RunID     string    `json:"runId"`
	JobID     string    `json:"jobId"`
	JobName   string    `json:"jobName"`
	Name      string    `json:"name"`
	BlobKey   string    `json:"-"`
	SizeBytes int64     `json:"sizeBytes"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// BlobIndexStore keeps the index of caches and artifacts (their bytes live
// in the blob store) and the job credentials agents present to reach them.
type BlobIndexStore interface {
	// InsertCacheEntry records e (CreatedAt and LastUsedAt default to now);
	// ErrConflict when (OrgID, Scope, Key) exists.
	InsertCacheEntry(ctx context.Context, e *CacheEntry) error
	// FindCacheEntry returns the entry of (orgID, scope) whose key is key,
	// or with prefix true the most recently created entry whose key starts
	// with key; ErrNotFound when none.
	FindCacheEntry(ctx context.Context, orgID, scope, key string, prefix bool) (*CacheEntry, error)
	// TouchCacheEntry sets an entry's LastUsedAt.
	TouchCacheEntry(ctx context.Context, id string, at time.Time) error
	// ListCacheEntries returns the cache entries of orgID ("" = every
	// org), least recently used first.
	ListCacheEntries(ctx context.Context, orgID string) ([]*CacheEntry, error)
	// DeleteCacheEntry removes an entry; a missing one is not an error.
	DeleteCacheEntry(ctx context.Context, id string) error

	// InsertArtifact records a, atomically refusing with ErrLimit when the
	// run already has maxPerRun artifacts or the org's artifacts would
	// total more than quotaBytes (a limit ≤ 0 is not checked), and with
	// ErrConflict when the run has an artifact of that name.
	InsertArtifact(ctx context.Context, a *Artifact, maxPerRun int, quotaBytes int64) error
	// GetArtifact returns the artifact name of runID, or ErrNotFound.
	GetArtifact(ctx context.Context, runID, name string) (*Artifact, error)
	// ListArtifacts returns the artifacts of runID, oldest first.
	ListArtifacts(ctx context.Context, runID string) ([]*Artifact, error)
	// ArtifactUsage returns how many artifacts orgID has and their total
	// size in bytes.
	ArtifactUsage(ctx context.Context, orgID string) (count int, bytes int64, err error)
	// ListExpiredArtifacts returns up to limit artifacts whose ExpiresAt
	// is before t, oldest first.
	ListExpiredArtifacts(ctx context.Context, t time.Time, limit int) ([]*Artifact, error)
	// DeleteArtifact removes an artifact row; a missing one is not an error.
	DeleteArtifact(ctx context.Context, id string) error

	// SetJobCredential records the SHA-256 (hex) of the credential issued
	// to jobID's current dispatch, replacing an earlier one.
	SetJobCredential(ctx context.Context, jobID, tokenHash string) error
	// JobForCredential returns the job a credential hash was issued to, or
	// ErrNotFound.
	JobForCredential(ctx context.Context, tokenHash string) (string, error)
}
