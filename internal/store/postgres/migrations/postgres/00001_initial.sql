-- +goose Up
-- Times are timestamptz written at millisecond precision. Labels, needs and
-- matrix values are jsonb (NULL keeps a Go nil apart from an empty list or
-- map); job config and delivery decisions are kept verbatim as text, the
-- delivery payload as bytea.

CREATE TABLE sources (
    id                  text PRIMARY KEY,
    org_id              text NOT NULL,
    name                text NOT NULL,
    provider            text NOT NULL,
    routing_key         text NOT NULL DEFAULT '',
    local_path          text NOT NULL DEFAULT '',
    verification_method text NOT NULL DEFAULT '',
    webhook_secret      text NOT NULL DEFAULT '',
    enabled             boolean NOT NULL DEFAULT true,
    created_at          timestamptz NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX sources_created_idx ON sources (created_at, id);

CREATE TABLE deliveries (
    id           text PRIMARY KEY,
    source_id    text NOT NULL DEFAULT '',
    org_id       text NOT NULL DEFAULT '',
    event        text NOT NULL DEFAULT '',
    payload      bytea,
    status       text NOT NULL,
    error        text NOT NULL DEFAULT '',
    decisions    text,
    received_at  timestamptz NOT NULL,
    processed_at timestamptz
);
CREATE INDEX deliveries_status_idx ON deliveries (status, received_at, id);

CREATE TABLE execution_runs (
    id              text PRIMARY KEY,
    workflow_name   text NOT NULL,
    status          text NOT NULL,
    provider        text NOT NULL DEFAULT '',
    repo_identifier text NOT NULL DEFAULT '',
    repo_url        text NOT NULL DEFAULT '',
    ref             text NOT NULL DEFAULT '',
    sha             text NOT NULL DEFAULT '',
    delivery_id     text NOT NULL DEFAULT '',
    source_id       text NOT NULL DEFAULT '',
    org_id          text NOT NULL DEFAULT '',
    triggered_by    text NOT NULL DEFAULT '',
    failure_reason  text NOT NULL DEFAULT '',
    timeout_ms      bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    started_at      timestamptz,
    completed_at    timestamptz,
    duration_ms     bigint
);
CREATE INDEX execution_runs_created_idx ON execution_runs (created_at DESC, id DESC);
CREATE INDEX execution_runs_status_idx ON execution_runs (status, created_at DESC);
CREATE INDEX execution_runs_workflow_idx ON execution_runs (workflow_name, created_at DESC);
CREATE INDEX execution_runs_repo_idx ON execution_runs (repo_identifier, created_at DESC);
CREATE INDEX execution_runs_delivery_idx ON execution_runs (delivery_id);

CREATE TABLE execution_jobs (
    id                text PRIMARY KEY,
    run_id            text NOT NULL REFERENCES execution_runs (id) ON DELETE CASCADE,
    seq               integer NOT NULL,
    job_name          text NOT NULL,
    base_job_name     text NOT NULL DEFAULT '',
    matrix_values     jsonb,
    status            text NOT NULL,
    agent_id          text NOT NULL DEFAULT '',
    config            text,
    runs_on_labels    jsonb,
    needs             jsonb,
    error_message     text NOT NULL DEFAULT '',
    pending_reason    text NOT NULL DEFAULT '',
    timeout_ms        bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL,
    started_at        timestamptz,
    completed_at      timestamptz,
    duration_ms       bigint,
    last_heartbeat_at timestamptz
);
CREATE INDEX execution_jobs_run_idx ON execution_jobs (run_id, seq);
CREATE INDEX execution_jobs_status_idx ON execution_jobs (status, created_at);

CREATE TABLE execution_steps (
    job_id        text NOT NULL REFERENCES execution_jobs (id) ON DELETE CASCADE,
    step_index    integer NOT NULL,
    run_id        text NOT NULL,
    step_name     text NOT NULL DEFAULT '',
    status        text NOT NULL,
    exit_code     integer,
    error_message text NOT NULL DEFAULT '',
    log_bytes     bigint NOT NULL DEFAULT 0,
    started_at    timestamptz,
    completed_at  timestamptz,
    duration_ms   bigint,
    PRIMARY KEY (job_id, step_index)
);

CREATE TABLE dispatch_queue (
    id                text PRIMARY KEY,
    seq               bigint GENERATED ALWAYS AS IDENTITY,
    run_id            text NOT NULL DEFAULT '',
    job_name          text NOT NULL DEFAULT '',
    runs_on_labels    jsonb,
    exclude_labels    jsonb,
    status            text NOT NULL,
    agent_id          text NOT NULL DEFAULT '',
    dispatch_attempts integer NOT NULL DEFAULT 0,
    ack_deadline      timestamptz,
    pinned_agent_id   text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL
);
CREATE INDEX dispatch_queue_status_idx ON dispatch_queue (status, created_at, seq);
CREATE INDEX dispatch_queue_labels_idx ON dispatch_queue USING gin (runs_on_labels);

CREATE TABLE agent_tokens (
    id           text PRIMARY KEY,
    token_hash   text NOT NULL UNIQUE,
    token_prefix text NOT NULL DEFAULT '',
    agent_type   text NOT NULL,
    created_by   text NOT NULL DEFAULT '',
    labels       jsonb,
    expires_at   timestamptz,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL
);
CREATE INDEX agent_tokens_created_idx ON agent_tokens (created_at DESC, id DESC);

CREATE TABLE admin_tokens (
    id         text PRIMARY KEY,
    label      text NOT NULL DEFAULT '',
    role       text NOT NULL,
    token_hash text NOT NULL UNIQUE,
    expires_at timestamptz,
    revoked    boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL
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
