-- +goose Up
-- Ingress: per-source settings and webhook secrets, the event log, rejected
-- deliveries, the registration index and named leases.

CREATE TABLE source_settings (
    source_id  text PRIMARY KEY,
    config     text NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE source_secrets (
    id         text PRIMARY KEY,
    source_id  text NOT NULL,
    secret     text NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX source_secrets_source_idx ON source_secrets (source_id, created_at);

CREATE TABLE event_log (
    id                     text PRIMARY KEY,
    delivery_id            text NOT NULL,
    is_primary             boolean NOT NULL,
    org_id                 text NOT NULL DEFAULT '',
    source_id              text NOT NULL DEFAULT '',
    routing_key            text NOT NULL DEFAULT '',
    event                  text NOT NULL DEFAULT '',
    action                 text NOT NULL DEFAULT '',
    source                 text NOT NULL DEFAULT '',
    provider               text NOT NULL DEFAULT '',
    repo_identifier        text NOT NULL DEFAULT '',
    ref                    text NOT NULL DEFAULT '',
    status                 text NOT NULL,
    matched_count          bigint NOT NULL DEFAULT 0,
    run_ids                text,
    error_message          text NOT NULL DEFAULT '',
    payload_gz             bytea,
    payload_size_bytes     bigint NOT NULL DEFAULT 0,
    payload_hash           text NOT NULL DEFAULT '',
    payload_omitted_reason text NOT NULL DEFAULT '',
    received_at timestamptz NOT NULL,
    processed_at timestamptz
);
CREATE UNIQUE INDEX event_log_primary_idx ON event_log (delivery_id) WHERE is_primary;
CREATE INDEX event_log_received_idx ON event_log (received_at DESC, id DESC);

CREATE TABLE rejected_deliveries (
    id                 text PRIMARY KEY,
    source_id          text NOT NULL DEFAULT '',
    org_id             text NOT NULL DEFAULT '',
    route              text NOT NULL DEFAULT '',
    delivery_header    text NOT NULL DEFAULT '',
    event              text NOT NULL DEFAULT '',
    status_code        integer NOT NULL,
    reason             text NOT NULL,
    remote_addr        text NOT NULL DEFAULT '',
    payload_size_bytes bigint NOT NULL DEFAULT 0,
    payload_hash       text NOT NULL DEFAULT '',
    received_at timestamptz NOT NULL
);
CREATE INDEX rejected_deliveries_source_idx ON rejected_deliveries (source_id, received_at DESC);

CREATE TABLE registrations (
    id              text PRIMARY KEY,
    org_id          text NOT NULL DEFAULT '',
    source_id       text NOT NULL DEFAULT '',
    routing_key     text NOT NULL DEFAULT '',
    provider        text NOT NULL DEFAULT '',
    repo_identifier text NOT NULL DEFAULT '',
    repo_url        text NOT NULL DEFAULT '',
    ref             text NOT NULL DEFAULT '',
    sha             text NOT NULL DEFAULT '',
    workflow_name   text NOT NULL,
    trigger_types   text NOT NULL,
    workflow        text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX registrations_repo_idx ON registrations (source_id, repo_identifier);

CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE leases;
DROP TABLE registrations;
DROP TABLE rejected_deliveries;
DROP TABLE event_log;
DROP TABLE source_secrets;
DROP TABLE source_settings;
