-- +goose Up
-- Agent sessions shared by every node (internal/agentsessions): a resume
-- token issued by one node is verified by any node the agent fails over
-- to, and a second connection for an agent id that is live on another node
-- is refused without it. Only the SHA-256 of the resume token is kept.
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
