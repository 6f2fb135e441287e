-- +goose Up
-- Routing-key scope of admin tokens ('' = unscoped), encrypted secrets and
-- the access log.
ALTER TABLE admin_tokens ADD COLUMN routing_key text NOT NULL DEFAULT '';
-- Mandatory labels (KiCI mandatory_labels, a taint): JSON list or NULL.
ALTER TABLE agent_tokens ADD COLUMN mandatory_labels text;

CREATE TABLE secret_scopes (
    org_id     text NOT NULL,
    scope      text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, scope)
);

CREATE TABLE scoped_secrets (
    org_id     text NOT NULL,
    scope      text NOT NULL,
    key        text NOT NULL,
    ciphertext bytea NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, scope, key),
    FOREIGN KEY (org_id, scope) REFERENCES secret_scopes (org_id, scope) ON DELETE CASCADE
);

CREATE TABLE access_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL,
    token_id    text NOT NULL DEFAULT '',
    token_label text NOT NULL DEFAULT '',
    role        text NOT NULL DEFAULT '',
    action      text NOT NULL,
    resource    text NOT NULL DEFAULT '',
    routing_key text NOT NULL DEFAULT '',
    detail      text NOT NULL DEFAULT ''
);
CREATE INDEX access_log_at_idx ON access_log (at DESC, id DESC);

-- +goose Down
DROP TABLE access_log;
DROP TABLE scoped_secrets;
DROP TABLE secret_scopes;
ALTER TABLE agent_tokens DROP COLUMN mandatory_labels;
ALTER TABLE admin_tokens DROP COLUMN routing_key;
