-- +goose Up
-- Approvals and trust: context gate fields, per-source variable overrides,
-- run trigger/trust facts, held runs with their decisions, the org trust
-- policy and the approval directory.
ALTER TABLE contexts ADD COLUMN trigger_type_filters JSONB NOT NULL DEFAULT '[]';
ALTER TABLE contexts ADD COLUMN repo_patterns JSONB NOT NULL DEFAULT '[]';
ALTER TABLE contexts ADD COLUMN allow_untrusted BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE context_source_overrides (
    context_id  text NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    routing_key text NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (context_id, routing_key, key)
);

ALTER TABLE execution_runs ADD COLUMN trigger_type text NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN target_branch text NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN trust_tier text NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN lock_file_source text NOT NULL DEFAULT '';

-- job_id is '' for a workflow-scoped hold. run_id is not a foreign key: a
-- hold is decision history with its own retention, independent of the run's.
CREATE TABLE held_runs (
    id           text PRIMARY KEY,
    org_id       text NOT NULL,
    run_id       text NOT NULL,
    job_id       text NOT NULL DEFAULT '',
    hold_type    text NOT NULL,
    queue_type   text NOT NULL,
    hold_scope   text NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    reason       text NOT NULL DEFAULT '',
    clauses      jsonb NOT NULL DEFAULT '[]',
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    resolved_at  timestamptz,
    resolved_by  text NOT NULL DEFAULT '',
    resolve_note text NOT NULL DEFAULT ''
);
CREATE INDEX held_runs_status_expires_idx ON held_runs (status, expires_at);
CREATE INDEX held_runs_run_idx ON held_runs (run_id);

-- The contexts that caused a hold, by name and deliberately not a foreign
-- key to contexts: a resolved hold keeps its context names as history, and
-- a pending one blocks the context's deletion instead.
CREATE TABLE held_run_contexts (
    held_run_id  text NOT NULL REFERENCES held_runs (id) ON DELETE CASCADE,
    org_id       text NOT NULL,
    context_name text NOT NULL,
    PRIMARY KEY (held_run_id, context_name)
);
CREATE INDEX held_run_contexts_name_idx ON held_run_contexts (org_id, context_name);

CREATE TABLE held_run_approvals (
    id          bigserial PRIMARY KEY,
    held_run_id text NOT NULL REFERENCES held_runs (id) ON DELETE CASCADE,
    approver    text NOT NULL,
    decision    text NOT NULL,
    clauses     jsonb NOT NULL DEFAULT '[]',
    reason      text NOT NULL DEFAULT '',
    at          timestamptz NOT NULL
);
CREATE INDEX held_run_approvals_hold_idx ON held_run_approvals (held_run_id, id);

CREATE TABLE org_trust_policy (
    org_id                  text PRIMARY KEY,
    fork_policy             text NOT NULL,
    approval_expiry_seconds bigint NOT NULL,
    source                  text NOT NULL DEFAULT 'local',
    updated_at              timestamptz NOT NULL
);

CREATE TABLE trust_directory (
    org_id            text NOT NULL,
    user_id           text NOT NULL,
    provider          text NOT NULL,
    provider_user_id  text NOT NULL,
    provider_username text NOT NULL DEFAULT '',
    ci_trust          text NOT NULL,
    updated_at        timestamptz NOT NULL,
    UNIQUE (org_id, provider, provider_user_id)
);
CREATE INDEX trust_directory_user_idx ON trust_directory (org_id, user_id);

-- +goose Down
DROP TABLE trust_directory;
DROP TABLE org_trust_policy;
DROP TABLE held_run_approvals;
DROP TABLE held_run_contexts;
DROP TABLE held_runs;
ALTER TABLE execution_runs DROP COLUMN lock_file_source;
ALTER TABLE execution_runs DROP COLUMN trust_tier;
ALTER TABLE execution_runs DROP COLUMN target_branch;
ALTER TABLE execution_runs DROP COLUMN trigger_type;
DROP TABLE context_source_overrides;
ALTER TABLE contexts DROP COLUMN allow_untrusted;
ALTER TABLE contexts DROP COLUMN repo_patterns;
ALTER TABLE contexts DROP COLUMN trigger_type_filters;
