-- +goose Up
-- Web UI sessions, shared by every node and kept across restarts
-- (store.WebSession). Only the SHA-256 of the cookie value is stored.
CREATE TABLE web_sessions (
    id           TEXT PRIMARY KEY,
    cookie_hash  TEXT NOT NULL UNIQUE,
    csrf         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    token_hash   TEXT NOT NULL,
    subject      TEXT NOT NULL,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL,
    routing_key  TEXT NOT NULL,
    client       TEXT NOT NULL,
    created_at   {{.Time}} NOT NULL,
    last_seen_at {{.Time}} NOT NULL
);
CREATE INDEX web_sessions_subject_idx ON web_sessions (subject);
CREATE INDEX web_sessions_last_seen_idx ON web_sessions (last_seen_at);

-- +goose Down
DROP TABLE web_sessions;
