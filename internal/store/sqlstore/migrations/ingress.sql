-- +goose Up
-- Ingress: per-source settings and webhook secrets, the event log, rejected
-- deliveries, the registration index and named leases.

CREATE TABLE source_settings (
    source_id  TEXT PRIMARY KEY,
    config     TEXT NOT NULL,
    updated_at {{.Time}} NOT NULL
);

CREATE TABLE source_secrets (
    id         TEXT PRIMARY KEY,
    source_id  TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at {{.Time}} NOT NULL,
    revoked_at {{.Time}}
);
CREATE INDEX source_secrets_source_idx ON source_secrets (source_id, created_at);

CREATE TABLE event_log (
    id                     TEXT PRIMARY KEY,
    delivery_id            TEXT NOT NULL,
    is_primary             {{.Bool}} NOT NULL,
    org_id                 TEXT NOT NULL DEFAULT '',
    source_id              TEXT NOT NULL DEFAULT '',
    routing_key            TEXT NOT NULL DEFAULT '',
    event                  TEXT NOT NULL DEFAULT '',
    action                 TEXT NOT NULL DEFAULT '',
    source                 TEXT NOT NULL DEFAULT '',
    provider               TEXT NOT NULL DEFAULT '',
    repo_identifier        TEXT NOT NULL DEFAULT '',
    ref                    TEXT NOT NULL DEFAULT '',
    status                 TEXT NOT NULL,
    matched_count          {{.Int}} NOT NULL DEFAULT 0,
    run_ids                TEXT,
    error_message          TEXT NOT NULL DEFAULT '',
    payload_gz             {{.Bytes}},
    payload_size_bytes     {{.Int}} NOT NULL DEFAULT 0,
    payload_hash           TEXT NOT NULL DEFAULT '',
    payload_omitted_reason TEXT NOT NULL DEFAULT '',
    received_at            {{.Time}} NOT NULL,
    processed_at           {{.Time}}
);
CREATE UNIQUE INDEX event_log_primary_idx ON event_log (delivery_id) WHERE is_primary{{if not .Postgres}} = 1{{end}};
CREATE INDEX event_log_received_idx ON event_log (received_at DESC, id DESC);

CREATE TABLE rejected_deliveries (
    id                 TEXT PRIMARY KEY,
    source_id          TEXT NOT NULL DEFAULT '',
    org_id             TEXT NOT NULL DEFAULT '',
    route              TEXT NOT NULL DEFAULT '',
    delivery_header    TEXT NOT NULL DEFAULT '',
    event              TEXT NOT NULL DEFAULT '',
    status_code        INTEGER NOT NULL,
    reason             TEXT NOT NULL,
    remote_addr        TEXT NOT NULL DEFAULT '',
    payload_size_bytes {{.Int}} NOT NULL DEFAULT 0,
    payload_hash       TEXT NOT NULL DEFAULT '',
    received_at        {{.Time}} NOT NULL
);
CREATE INDEX rejected_deliveries_source_idx ON rejected_deliveries (source_id, received_at DESC);

CREATE TABLE registrations (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL DEFAULT '',
    source_id       TEXT NOT NULL DEFAULT '',
    routing_key     TEXT NOT NULL DEFAULT '',
    provider        TEXT NOT NULL DEFAULT '',
    repo_identifier TEXT NOT NULL DEFAULT '',
    repo_url        TEXT NOT NULL DEFAULT '',
    ref             TEXT NOT NULL DEFAULT '',
    sha             TEXT NOT NULL DEFAULT '',
    workflow_name   TEXT NOT NULL,
    trigger_types   TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    created_at      {{.Time}} NOT NULL
);
CREATE INDEX registrations_repo_idx ON registrations (source_id, repo_identifier);

CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at {{.Time}} NOT NULL
);

-- +goose Down
DROP TABLE leases;
DROP TABLE registrations;
DROP TABLE rejected_deliveries;
DROP TABLE event_log;
DROP TABLE source_secrets;
DROP TABLE source_settings;
