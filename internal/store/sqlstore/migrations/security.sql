-- +goose Up
-- Routing-key scope of admin tokens ('' = unscoped), encrypted secrets and
-- the access log.
ALTER TABLE admin_tokens ADD COLUMN routing_key TEXT NOT NULL DEFAULT '';
-- Mandatory labels (KiCI mandatory_labels, a taint): JSON list or NULL.
ALTER TABLE agent_tokens ADD COLUMN mandatory_labels TEXT;

CREATE TABLE secret_scopes (
    org_id     TEXT NOT NULL,
    scope      TEXT NOT NULL,
    created_at {{.Time}} NOT NULL,
    PRIMARY KEY (org_id, scope)
);

CREATE TABLE scoped_secrets (
    org_id     TEXT NOT NULL,
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    ciphertext {{.Bytes}} NOT NULL,
    updated_at {{.Time}} NOT NULL,
    PRIMARY KEY (org_id, scope, key),
    FOREIGN KEY (org_id, scope) REFERENCES secret_scopes (org_id, scope) ON DELETE CASCADE
);

CREATE TABLE access_log (
    id          {{.Serial}},
    at          {{.Time}} NOT NULL,
    token_id    TEXT NOT NULL DEFAULT '',
    token_label TEXT NOT NULL DEFAULT '',
    role        TEXT NOT NULL DEFAULT '',
    action      TEXT NOT NULL,
    resource    TEXT NOT NULL DEFAULT '',
    routing_key TEXT NOT NULL DEFAULT '',
    detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX access_log_at_idx ON access_log (at DESC, id DESC);

-- +goose Down
DROP TABLE access_log;
DROP TABLE scoped_secrets;
DROP TABLE secret_scopes;
ALTER TABLE agent_tokens DROP COLUMN mandatory_labels;
ALTER TABLE admin_tokens DROP COLUMN routing_key;
