-- +goose Up
-- Workflow concurrency groups (KiCI concurrency_groups): one row per run of
-- a workflow with a concurrency group.
CREATE TABLE concurrency_entries (
    run_id             TEXT PRIMARY KEY,
    scope              TEXT NOT NULL,
    group_key          TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'queued', 'completed', 'cancelled')),
    max_active         INTEGER NOT NULL,
    cancel_in_progress {{.Bool}} NOT NULL,
    created_at         {{.Time}} NOT NULL
);
CREATE INDEX concurrency_entries_group ON concurrency_entries (scope, group_key, status, created_at);

-- Reruns (KiCI execution_runs.parent_run_id / original_run_id): the run a
-- rerun repeats and the root of the chain.
CREATE TABLE run_links (
    run_id          TEXT PRIMARY KEY REFERENCES execution_runs (id) ON DELETE CASCADE,
    parent_run_id   TEXT NOT NULL,
    original_run_id TEXT NOT NULL,
    created_at      {{.Time}} NOT NULL
);
CREATE INDEX run_links_parent ON run_links (parent_run_id);

-- +goose Down
DROP TABLE run_links;
DROP TABLE concurrency_entries;
