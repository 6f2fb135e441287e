-- +goose Up
-- Statements that read a growing table end to end, found by asking SQLite
-- for the plan of every statement the store runs.
{{- if not .Postgres}}
-- SQLite uses a partial index only when the statement's WHERE contains the
-- index's own WHERE term as written: the statements say `AND is_primary`,
-- so an index on `is_primary = 1` was never used and finishing each
-- delivery scanned the whole event log.
DROP INDEX event_log_primary_idx;
CREATE UNIQUE INDEX event_log_primary_idx ON event_log (delivery_id) WHERE is_primary;
{{- end}}
-- Retention deletes a swept run's queue entries by run.
CREATE INDEX dispatch_queue_run_idx ON dispatch_queue (run_id);
-- The holds list pages in creation order.
CREATE INDEX held_runs_created_idx ON held_runs (created_at, id);
-- Retention sweeps attestations by age.
CREATE INDEX provenance_attestations_created_idx ON provenance_attestations (created_at);
-- The runs list filtered by source, and its total.
CREATE INDEX execution_runs_source_idx ON execution_runs (source_id, created_at DESC);
-- The rejected-deliveries list of every source, newest first.
CREATE INDEX rejected_deliveries_received_idx ON rejected_deliveries (received_at DESC, id DESC);
-- The periodic reconcile reads the active and queued entries of every
-- group; finished entries stay in the table until retention.
CREATE INDEX concurrency_entries_status_idx ON concurrency_entries (status, created_at);
-- The forge reporter asks, every poll, for the check runs still open and
-- for those whose last state is not posted yet: a handful among every
-- job's row. Its queries repeat these WHERE terms as written, which is
-- what lets SQLite use a partial index. The admin list pages by age.
CREATE INDEX check_run_tracking_open_idx ON check_run_tracking (created_at, job_id)
    WHERE (NOT desired_terminal OR posted_hash <> desired_hash) AND gave_up_hash <> desired_hash;
CREATE INDEX check_run_tracking_undelivered_idx ON check_run_tracking (created_at, job_id)
    WHERE posted_hash <> desired_hash AND gave_up_hash <> desired_hash;
CREATE INDEX check_run_tracking_created_idx ON check_run_tracking (created_at, job_id);

-- +goose Down
DROP INDEX check_run_tracking_created_idx;
DROP INDEX concurrency_entries_status_idx;
DROP INDEX check_run_tracking_undelivered_idx;
DROP INDEX check_run_tracking_open_idx;
DROP INDEX rejected_deliveries_received_idx;
DROP INDEX execution_runs_source_idx;
DROP INDEX provenance_attestations_created_idx;
DROP INDEX held_runs_created_idx;
DROP INDEX dispatch_queue_run_idx;
{{- if not .Postgres}}
DROP INDEX event_log_primary_idx;
CREATE UNIQUE INDEX event_log_primary_idx ON event_log (delivery_id) WHERE is_primary = 1;
{{- end}}
