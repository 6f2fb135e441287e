-- +goose Up
-- The node registry: one row per orchestrator, refreshed by its heartbeat;
-- drain mode lives here so a drain set through any node reaches every node.
CREATE TABLE cluster_nodes (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    draining     INTEGER NOT NULL DEFAULT 0,
    jobs_running INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE cluster_nodes;
