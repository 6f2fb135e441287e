-- +goose Up
-- Each node's count of connected agents, refreshed by its heartbeat like
-- jobs_running, so any node can show the whole cluster's agents.
ALTER TABLE cluster_nodes ADD COLUMN agents_connected INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE cluster_nodes DROP COLUMN agents_connected;
