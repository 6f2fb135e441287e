-- +goose Up
-- Context concurrency strategy and wait timeout (KiCI
-- contexts.concurrency_strategy, concurrency_timeout_ms): what a job that
-- finds its concurrency group full does ('queue' or 'cancel-pending') and
-- how long it may wait for a slot (NULL = the default). A concurrency hold
-- records the group it waits for, so the gate can find the group's waiting
-- jobs without re-deriving groups from their contexts.
ALTER TABLE contexts ADD COLUMN concurrency_strategy TEXT NOT NULL DEFAULT 'queue';
ALTER TABLE contexts ADD COLUMN concurrency_timeout_ms {{.Int}};

ALTER TABLE held_runs ADD COLUMN concurrency_group TEXT NOT NULL DEFAULT '';
CREATE INDEX held_runs_group_idx ON held_runs (org_id, concurrency_group, status);

-- +goose Down
DROP INDEX held_runs_group_idx;
ALTER TABLE held_runs DROP COLUMN concurrency_group;
ALTER TABLE contexts DROP COLUMN concurrency_timeout_ms;
ALTER TABLE contexts DROP COLUMN concurrency_strategy;
