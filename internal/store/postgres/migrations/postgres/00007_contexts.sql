-- +goose Up
-- Contexts, their secret-scope bindings and org-level variables (KiCI
-- contexts, context_bindings, context_variables).
CREATE TABLE contexts (
    id                    TEXT PRIMARY KEY,
    org_id                TEXT NOT NULL,
    name                  TEXT NOT NULL,
    type                  TEXT NOT NULL DEFAULT 'fixed',
    glob_pattern          TEXT NOT NULL DEFAULT '',
    enabled               BOOLEAN NOT NULL DEFAULT TRUE,
    branch_restrictions   JSONB NOT NULL DEFAULT '[]',
    required_reviewers    JSONB,
    wait_timer_seconds    BIGINT,
    hold_expiry_seconds   BIGINT,
    minimum_trust         TEXT,
    allow_local_execution BOOLEAN NOT NULL DEFAULT FALSE,
    created_by            TEXT NOT NULL DEFAULT '',
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE context_bindings (
    id            BIGSERIAL PRIMARY KEY,
    context_id    TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    scope_pattern TEXT NOT NULL,
    host_pattern  TEXT NOT NULL DEFAULT '**',
    created_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (context_id, scope_pattern, host_pattern)
);

CREATE TABLE context_variables (
    context_id TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    locked     BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (context_id, key)
);

-- +goose Down
DROP TABLE context_variables;
DROP TABLE context_bindings;
DROP TABLE contexts;
