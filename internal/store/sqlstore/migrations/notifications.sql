{{- if .Postgres}}
-- The index on execution_runs is built CONCURRENTLY, which cannot run
-- inside a transaction; every statement can run again after an
-- interruption.
-- +goose NO TRANSACTION
{{end -}}
-- +goose Up
-- Notification subscriptions and their outbox (internal/notify).
CREATE TABLE IF NOT EXISTS notification_subscriptions (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL,
    source_id     TEXT NOT NULL DEFAULT '',
    workflow_name TEXT NOT NULL DEFAULT '',
    outcomes      TEXT NOT NULL,
    channel       TEXT NOT NULL,
    target        TEXT NOT NULL,
    secret        TEXT NOT NULL DEFAULT '',
    enabled       {{.Bool}} NOT NULL DEFAULT {{.True}},
    created_at    {{.Time}} NOT NULL
);

CREATE TABLE IF NOT EXISTS notification_deliveries (
    id               TEXT PRIMARY KEY,
    subscription_id  TEXT NOT NULL REFERENCES notification_subscriptions (id) ON DELETE CASCADE,
    org_id           TEXT NOT NULL,
    run_id           TEXT NOT NULL,
    outcome          TEXT NOT NULL,
    channel          TEXT NOT NULL,
    payload          {{.Bytes}} NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  {{.Time}},
    claimed_by       TEXT NOT NULL DEFAULT '',
    claimed_until    {{.Time}},
    last_error       TEXT NOT NULL DEFAULT '',
    last_status_code INTEGER NOT NULL DEFAULT 0,
    delivered_at     {{.Time}},
    created_at       {{.Time}} NOT NULL,
    updated_at       {{.Time}} NOT NULL,
    UNIQUE (subscription_id, run_id, outcome)
);
CREATE INDEX IF NOT EXISTS notification_deliveries_due_idx ON notification_deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS notification_deliveries_run_idx ON notification_deliveries (run_id);
-- The notifier reads the runs completed since a moment.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS execution_runs_completed_idx;
{{end -}}
CREATE INDEX {{.Concurrently}}execution_runs_completed_idx ON execution_runs (completed_at);

-- +goose Down
DROP INDEX {{.Concurrently}}execution_runs_completed_idx;
DROP TABLE notification_deliveries;
DROP TABLE notification_subscriptions;
