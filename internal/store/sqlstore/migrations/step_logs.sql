-- +goose Up
-- Step logs shared by every node (internal/logstore's PostgreSQL backend).
-- step_log_heads has one row per (job, step): the number of lines stored
-- and the agent offset held; an append locks it, so appends to one step
-- are serialised across nodes and a replay of lines already held is a
-- no-op. step_log_chunks holds the lines themselves, append-only, in
-- chunks of at most a few hundred lines keyed by their first line number,
-- so a page is read by offset from one index range.
CREATE TABLE step_log_heads (
    job_id       TEXT NOT NULL,
    step_index   INTEGER NOT NULL,
    run_id       TEXT NOT NULL,
    lines        BIGINT NOT NULL DEFAULT 0,
    agent_offset BIGINT NOT NULL DEFAULT 0,
    updated_at   {{.Time}} NOT NULL,
    PRIMARY KEY (job_id, step_index)
);
CREATE INDEX step_log_heads_run ON step_log_heads (run_id);
CREATE INDEX step_log_heads_updated ON step_log_heads (updated_at);

CREATE TABLE step_log_chunks (
    job_id     TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    first_line BIGINT NOT NULL,
    line_count INTEGER NOT NULL,
    run_id     TEXT NOT NULL,
    body       {{.Bytes}} NOT NULL,
    PRIMARY KEY (job_id, step_index, first_line)
);
CREATE INDEX step_log_chunks_run ON step_log_chunks (run_id);

-- +goose Down
DROP TABLE step_log_chunks;
DROP TABLE step_log_heads;
