-- +goose Up
-- Times are Unix milliseconds (UTC) as INTEGER on SQLite, timestamptz
-- written at millisecond precision on PostgreSQL. Labels, needs and matrix
-- values are JSON (TEXT on SQLite, jsonb on PostgreSQL; NULL keeps a Go nil
-- apart from an empty list or map); job config and delivery decisions are
-- kept verbatim as text, the delivery payload as bytes.

CREATE TABLE sources (
    id                  TEXT PRIMARY KEY,
    org_id              TEXT NOT NULL,
    name                TEXT NOT NULL,
    provider            TEXT NOT NULL,
    routing_key         TEXT NOT NULL DEFAULT '',
    local_path          TEXT NOT NULL DEFAULT '',
    verification_method TEXT NOT NULL DEFAULT '',
    webhook_secret      TEXT NOT NULL DEFAULT '',
    enabled             {{.Bool}} NOT NULL DEFAULT {{.True}},
    created_at          {{.Time}} NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX sources_created_idx ON sources (created_at, id);

CREATE TABLE deliveries (
    id           TEXT PRIMARY KEY,
    source_id    TEXT NOT NULL DEFAULT '',
    org_id       TEXT NOT NULL DEFAULT '',
    event        TEXT NOT NULL DEFAULT '',
    payload      {{.Bytes}},
    status       TEXT NOT NULL,
    error        TEXT NOT NULL DEFAULT '',
    decisions    TEXT,
    received_at  {{.Time}} NOT NULL,
    processed_at {{.Time}}
);
CREATE INDEX deliveries_status_idx ON deliveries (status, received_at, id);

CREATE TABLE execution_runs (
    id              TEXT PRIMARY KEY,
    workflow_name   TEXT NOT NULL,
    status          TEXT NOT NULL,
    provider        TEXT NOT NULL DEFAULT '',
    repo_identifier TEXT NOT NULL DEFAULT '',
    repo_url        TEXT NOT NULL DEFAULT '',
    ref             TEXT NOT NULL DEFAULT '',
    sha             TEXT NOT NULL DEFAULT '',
    delivery_id     TEXT NOT NULL DEFAULT '',
    source_id       TEXT NOT NULL DEFAULT '',
    org_id          TEXT NOT NULL DEFAULT '',
    triggered_by    TEXT NOT NULL DEFAULT '',
    failure_reason  TEXT NOT NULL DEFAULT '',
    timeout_ms      {{.Int}} NOT NULL DEFAULT 0,
    created_at      {{.Time}} NOT NULL,
    started_at      {{.Time}},
    completed_at    {{.Time}},
    duration_ms     {{.Int}}
);
CREATE INDEX execution_runs_created_idx ON execution_runs (created_at DESC, id DESC);
CREATE INDEX execution_runs_status_idx ON execution_runs (status, created_at DESC);
CREATE INDEX execution_runs_workflow_idx ON execution_runs (workflow_name, created_at DESC);
CREATE INDEX execution_runs_repo_idx ON execution_runs (repo_identifier, created_at DESC);
CREATE INDEX execution_runs_delivery_idx ON execution_runs (delivery_id);

CREATE TABLE execution_jobs (
    id                TEXT PRIMARY KEY,
    run_id            TEXT NOT NULL REFERENCES execution_runs (id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    job_name          TEXT NOT NULL,
    base_job_name     TEXT NOT NULL DEFAULT '',
    matrix_values     {{.JSON}},
    status            TEXT NOT NULL,
    agent_id          TEXT NOT NULL DEFAULT '',
    config            TEXT,
    runs_on_labels    {{.JSON}},
    needs             {{.JSON}},
    error_message     TEXT NOT NULL DEFAULT '',
    pending_reason    TEXT NOT NULL DEFAULT '',
    timeout_ms        {{.Int}} NOT NULL DEFAULT 0,
    created_at        {{.Time}} NOT NULL,
    started_at        {{.Time}},
    completed_at      {{.Time}},
    duration_ms       {{.Int}},
    last_heartbeat_at {{.Time}}
);
CREATE INDEX execution_jobs_run_idx ON execution_jobs (run_id, seq);
CREATE INDEX execution_jobs_status_idx ON execution_jobs (status, created_at);

CREATE TABLE execution_steps (
    job_id        TEXT NOT NULL REFERENCES execution_jobs (id) ON DELETE CASCADE,
    step_index    INTEGER NOT NULL,
    run_id        TEXT NOT NULL,
    step_name     TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    exit_code     INTEGER,
    error_message TEXT NOT NULL DEFAULT '',
    log_bytes     {{.Int}} NOT NULL DEFAULT 0,
    started_at    {{.Time}},
    completed_at  {{.Time}},
    duration_ms   {{.Int}},
    PRIMARY KEY (job_id, step_index)
);

CREATE TABLE dispatch_queue (
    id               TEXT PRIMARY KEY,
    seq              {{if .Postgres}}BIGINT GENERATED ALWAYS AS IDENTITY{{else}}INTEGER NOT NULL{{end}},
    run_id           TEXT NOT NULL DEFAULT '',
    job_name         TEXT NOT NULL DEFAULT '',
    runs_on_labels   {{.JSON}},
    exclude_labels   {{.JSON}},
    status           TEXT NOT NULL,
    agent_id         TEXT NOT NULL DEFAULT '',
    dispatch_attempts INTEGER NOT NULL DEFAULT 0,
    ack_deadline     {{.Time}},
    pinned_agent_id  TEXT NOT NULL DEFAULT '',
    created_at       {{.Time}} NOT NULL
);
CREATE INDEX dispatch_queue_status_idx ON dispatch_queue (status, created_at, seq);
{{- if .Postgres}}
-- Label matching reads runs_on_labels with jsonb containment.
CREATE INDEX dispatch_queue_labels_idx ON dispatch_queue USING gin (runs_on_labels);
{{- end}}

CREATE TABLE agent_tokens (
    id           TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    token_prefix TEXT NOT NULL DEFAULT '',
    agent_type   TEXT NOT NULL,
    created_by   TEXT NOT NULL DEFAULT '',
    labels       {{.JSON}},
    expires_at   {{.Time}},
    revoked_at   {{.Time}},
    created_at   {{.Time}} NOT NULL
);
CREATE INDEX agent_tokens_created_idx ON agent_tokens (created_at DESC, id DESC);

CREATE TABLE admin_tokens (
    id         TEXT PRIMARY KEY,
    label      TEXT NOT NULL DEFAULT '',
    role       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    expires_at {{.Time}},
    revoked    {{.Bool}} NOT NULL DEFAULT {{.False}},
    created_at {{.Time}} NOT NULL
);
CREATE INDEX admin_tokens_created_idx ON admin_tokens (created_at DESC, id DESC);

-- +goose Down
DROP TABLE admin_tokens;
DROP TABLE agent_tokens;
DROP TABLE dispatch_queue;
DROP TABLE execution_steps;
DROP TABLE execution_jobs;
DROP TABLE execution_runs;
DROP TABLE deliveries;
DROP TABLE sources;
