-- +goose Up
-- Agent sessions on the embedded single node (SQLite): the same table the
-- PostgreSQL migration agent_sessions creates for a cluster, so that an
-- orchestrator restart still knows which session holds each agent id
-- (store.AgentSession). Only the SHA-256 of the resume token is kept.
CREATE TABLE agent_sessions (
    agent_id    TEXT PRIMARY KEY,
    token_id    TEXT NOT NULL,
    resume_hash {{.Bytes}} NOT NULL,
    node_id     TEXT NOT NULL,
    live        {{.Bool}} NOT NULL,
    updated_at  {{.Time}} NOT NULL
);

-- +goose Down
DROP TABLE agent_sessions;
