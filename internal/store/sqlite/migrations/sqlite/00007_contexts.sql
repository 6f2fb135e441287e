-- +goose Up
-- Contexts, their secret-scope bindings and org-level variables (KiCI
-- contexts, context_bindings, context_variables). Lists are JSON text.
CREATE TABLE contexts (
    id                    TEXT PRIMARY KEY,
    org_id                TEXT NOT NULL,
    name                  TEXT NOT NULL,
    type                  TEXT NOT NULL DEFAULT 'fixed',
    glob_pattern          TEXT NOT NULL DEFAULT '',
    enabled               INTEGER NOT NULL DEFAULT 1,
    branch_restrictions   TEXT NOT NULL DEFAULT '[]',
    required_reviewers    TEXT,
    wait_timer_seconds    INTEGER,
    hold_expiry_seconds   INTEGER,
    minimum_trust         TEXT,
    allow_local_execution INTEGER NOT NULL DEFAULT 0,
    created_by            TEXT NOT NULL DEFAULT '',
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE context_bindings (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id    TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    scope_pattern TEXT NOT NULL,
    host_pattern  TEXT NOT NULL DEFAULT '**',
    created_at    INTEGER NOT NULL,
    UNIQUE (context_id, scope_pattern, host_pattern)
);

CREATE TABLE context_variables (
    context_id TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    locked     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (context_id, key)
);

-- +goose Down
DROP TABLE context_variables;
DROP TABLE context_bindings;
DROP TABLE contexts;
