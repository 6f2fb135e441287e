-- +goose Up
-- The node registry: one row per orchestrator, refreshed by its heartbeat;
-- drain mode lives here so a drain set through any node reaches every node.
CREATE TABLE cluster_nodes (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   {{.Time}} NOT NULL,
    heartbeat_at {{.Time}} NOT NULL,
    draining     {{.Bool}} NOT NULL DEFAULT {{.False}},
    jobs_running INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE cluster_nodes;
