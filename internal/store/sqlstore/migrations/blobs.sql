-- +goose Up
-- Job caches and artifacts: the index of objects kept in the blob store
-- (which holds their bytes), and the per-dispatch job credential agents
-- present to upload and download them.
CREATE TABLE cache_entries (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    scope        TEXT NOT NULL,
    cache_key    TEXT NOT NULL,
    blob_key     TEXT NOT NULL,
    size_bytes   {{.Int}} NOT NULL,
    sha256       TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    created_at   {{.Time}} NOT NULL,
    last_used_at {{.Time}} NOT NULL,
    UNIQUE (org_id, scope, cache_key)
);
CREATE INDEX cache_entries_lru_idx ON cache_entries (org_id, last_used_at);

CREATE TABLE run_artifacts (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    job_name   TEXT NOT NULL,
    name       TEXT NOT NULL,
    blob_key   TEXT NOT NULL,
    size_bytes {{.Int}} NOT NULL,
    sha256     TEXT NOT NULL,
    created_at {{.Time}} NOT NULL,
    expires_at {{.Time}} NOT NULL,
    UNIQUE (run_id, name)
);
CREATE INDEX run_artifacts_org_idx ON run_artifacts (org_id);
CREATE INDEX run_artifacts_expiry_idx ON run_artifacts (expires_at);

CREATE TABLE job_credentials (
    job_id     TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at {{.Time}} NOT NULL
);

-- +goose Down
DROP TABLE job_credentials;
DROP TABLE run_artifacts;
DROP TABLE cache_entries;
