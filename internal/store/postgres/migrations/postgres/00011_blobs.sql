-- +goose Up
-- Job caches and artifacts: the index of objects kept in the blob store
-- (which holds their bytes), and the per-dispatch job credential agents
-- present to upload and download them. Times are timestamptz.
CREATE TABLE cache_entries (
    id           text PRIMARY KEY,
    org_id       text NOT NULL,
    scope        text NOT NULL,
    cache_key    text NOT NULL,
    blob_key     text NOT NULL,
    size_bytes   BIGINT NOT NULL,
    sha256       text NOT NULL,
    job_id       text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz NOT NULL,
    UNIQUE (org_id, scope, cache_key)
);
CREATE INDEX cache_entries_lru_idx ON cache_entries (org_id, last_used_at);

CREATE TABLE run_artifacts (
    id         text PRIMARY KEY,
    org_id     text NOT NULL,
    run_id     text NOT NULL,
    job_id     text NOT NULL,
    job_name   text NOT NULL,
    name       text NOT NULL,
    blob_key   text NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256     text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    UNIQUE (run_id, name)
);
CREATE INDEX run_artifacts_org_idx ON run_artifacts (org_id);
CREATE INDEX run_artifacts_expiry_idx ON run_artifacts (expires_at);

CREATE TABLE job_credentials (
    job_id     text PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE job_credentials;
DROP TABLE run_artifacts;
DROP TABLE cache_entries;
