-- +goose Up
-- Approvals and trust: context gate fields, per-source variable overrides,
-- run trigger/trust facts, held runs with their decisions, the org trust
-- policy and the approval directory.
ALTER TABLE contexts ADD COLUMN trigger_type_filters {{.JSON}} NOT NULL DEFAULT '[]';
ALTER TABLE contexts ADD COLUMN repo_patterns {{.JSON}} NOT NULL DEFAULT '[]';
ALTER TABLE contexts ADD COLUMN allow_untrusted {{.Bool}} NOT NULL DEFAULT {{.False}};

CREATE TABLE context_source_overrides (
    context_id  TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    routing_key TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  {{.Time}} NOT NULL,
    PRIMARY KEY (context_id, routing_key, key)
);

ALTER TABLE execution_runs ADD COLUMN trigger_type TEXT NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN target_branch TEXT NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN trust_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE execution_runs ADD COLUMN lock_file_source TEXT NOT NULL DEFAULT '';

-- job_id is '' for a workflow-scoped hold. run_id is not a foreign key: a
-- hold is decision history with its own retention, independent of the run's.
CREATE TABLE held_runs (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    job_id       TEXT NOT NULL DEFAULT '',
    hold_type    TEXT NOT NULL,
    queue_type   TEXT NOT NULL,
    hold_scope   TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    reason       TEXT NOT NULL DEFAULT '',
    clauses      {{.JSON}} NOT NULL DEFAULT '[]',
    expires_at   {{.Time}} NOT NULL,
    created_at   {{.Time}} NOT NULL,
    resolved_at  {{.Time}},
    resolved_by  TEXT NOT NULL DEFAULT '',
    resolve_note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX held_runs_status_expires_idx ON held_runs (status, expires_at);
CREATE INDEX held_runs_run_idx ON held_runs (run_id);

-- The contexts that caused a hold, by name and deliberately not a foreign
-- key to contexts: a resolved hold keeps its context names as history, and
-- a pending one blocks the context's deletion instead.
CREATE TABLE held_run_contexts (
    held_run_id  TEXT NOT NULL REFERENCES held_runs (id) ON DELETE CASCADE,
    org_id       TEXT NOT NULL,
    context_name TEXT NOT NULL,
    PRIMARY KEY (held_run_id, context_name)
);
CREATE INDEX held_run_contexts_name_idx ON held_run_contexts (org_id, context_name);

CREATE TABLE held_run_approvals (
    id          {{.Serial}},
    held_run_id TEXT NOT NULL REFERENCES held_runs (id) ON DELETE CASCADE,
    approver    TEXT NOT NULL,
    decision    TEXT NOT NULL,
    clauses     {{.JSON}} NOT NULL DEFAULT '[]',
    reason      TEXT NOT NULL DEFAULT '',
    at          {{.Time}} NOT NULL
);
CREATE INDEX held_run_approvals_hold_idx ON held_run_approvals (held_run_id, id);

CREATE TABLE org_trust_policy (
    org_id                  TEXT PRIMARY KEY,
    fork_policy             TEXT NOT NULL,
    approval_expiry_seconds {{.Int}} NOT NULL,
    source                  TEXT NOT NULL DEFAULT 'local',
    updated_at              {{.Time}} NOT NULL
);

CREATE TABLE trust_directory (
    org_id            TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    provider          TEXT NOT NULL,
    provider_user_id  TEXT NOT NULL,
    provider_username TEXT NOT NULL DEFAULT '',
    ci_trust          TEXT NOT NULL,
    updated_at        {{.Time}} NOT NULL,
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
