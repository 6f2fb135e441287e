-- +goose Up
-- Contexts, their secret-scope bindings and org-level variables (KiCI
-- contexts, context_bindings, context_variables).
CREATE TABLE contexts (
    id                    TEXT PRIMARY KEY,
    org_id                TEXT NOT NULL,
    name                  TEXT NOT NULL,
    type                  TEXT NOT NULL DEFAULT 'fixed',
    glob_pattern          TEXT NOT NULL DEFAULT '',
    enabled               {{.Bool}} NOT NULL DEFAULT {{.True}},
    branch_restrictions   {{.JSON}} NOT NULL DEFAULT '[]',
    required_reviewers    {{.JSON}},
    wait_timer_seconds    {{.Int}},
    hold_expiry_seconds   {{.Int}},
    minimum_trust         TEXT,
    allow_local_execution {{.Bool}} NOT NULL DEFAULT {{.False}},
    created_by            TEXT NOT NULL DEFAULT '',
    created_at            {{.Time}} NOT NULL,
    updated_at            {{.Time}} NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE context_bindings (
    id            {{.Serial}},
    context_id    TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    scope_pattern TEXT NOT NULL,
    host_pattern  TEXT NOT NULL DEFAULT '**',
    created_at    {{.Time}} NOT NULL,
    UNIQUE (context_id, scope_pattern, host_pattern)
);

CREATE TABLE context_variables (
    context_id TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    locked     {{.Bool}} NOT NULL DEFAULT {{.False}},
    updated_at {{.Time}} NOT NULL,
    PRIMARY KEY (context_id, key)
);

-- +goose Down
DROP TABLE context_variables;
DROP TABLE context_bindings;
DROP TABLE contexts;
