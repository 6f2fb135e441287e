{{- if .Postgres}}
-- PostgreSQL builds and drops these indexes CONCURRENTLY, so writes to
-- the (large, busy) tables go on during the build; that cannot run inside
-- a transaction. A build interrupted half way leaves an invalid index
-- behind: each is dropped first, so the migration can simply run again.
-- +goose NO TRANSACTION
{{end -}}
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
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS dispatch_queue_run_idx;
{{end}}CREATE INDEX {{.Concurrently}}dispatch_queue_run_idx ON dispatch_queue (run_id);
-- The holds list pages in creation order.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS held_runs_created_idx;
{{end}}CREATE INDEX {{.Concurrently}}held_runs_created_idx ON held_runs (created_at, id);
-- Retention sweeps attestations by age.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS provenance_attestations_created_idx;
{{end}}CREATE INDEX {{.Concurrently}}provenance_attestations_created_idx ON provenance_attestations (created_at);
-- The runs list filtered by source, and its total.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS execution_runs_source_idx;
{{end}}CREATE INDEX {{.Concurrently}}execution_runs_source_idx ON execution_runs (source_id, created_at DESC);
-- The rejected-deliveries list of every source, newest first.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS rejected_deliveries_received_idx;
{{end}}CREATE INDEX {{.Concurrently}}rejected_deliveries_received_idx ON rejected_deliveries (received_at DESC, id DESC);
-- The periodic reconcile reads the active and queued entries of every
-- group; finished entries stay in the table until retention.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS concurrency_entries_status_idx;
{{end}}CREATE INDEX {{.Concurrently}}concurrency_entries_status_idx ON concurrency_entries (status, created_at);
-- The forge reporter asks, every poll, for the check runs still open and
-- for those whose last state is not posted yet: a handful among every
-- job's row. Its queries repeat these WHERE terms as written, which is
-- what lets SQLite use a partial index. The admin list pages by age.
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS check_run_tracking_open_idx;
{{end}}CREATE INDEX {{.Concurrently}}check_run_tracking_open_idx ON check_run_tracking (created_at, job_id)
    WHERE (NOT desired_terminal OR posted_hash <> desired_hash) AND gave_up_hash <> desired_hash;
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS check_run_tracking_undelivered_idx;
{{end}}CREATE INDEX {{.Concurrently}}check_run_tracking_undelivered_idx ON check_run_tracking (created_at, job_id)
    WHERE posted_hash <> desired_hash AND gave_up_hash <> desired_hash;
{{if .Postgres}}DROP INDEX CONCURRENTLY IF EXISTS check_run_tracking_created_idx;
{{end}}CREATE INDEX {{.Concurrently}}check_run_tracking_created_idx ON check_run_tracking (created_at, job_id);

-- +goose Down
DROP INDEX {{.Concurrently}}check_run_tracking_created_idx;
DROP INDEX {{.Concurrently}}concurrency_entries_status_idx;
DROP INDEX {{.Concurrently}}check_run_tracking_undelivered_idx;
DROP INDEX {{.Concurrently}}check_run_tracking_open_idx;
DROP INDEX {{.Concurrently}}rejected_deliveries_received_idx;
DROP INDEX {{.Concurrently}}execution_runs_source_idx;
DROP INDEX {{.Concurrently}}provenance_attestations_created_idx;
DROP INDEX {{.Concurrently}}held_runs_created_idx;
DROP INDEX {{.Concurrently}}dispatch_queue_run_idx;
{{- if not .Postgres}}
DROP INDEX event_log_primary_idx;
CREATE UNIQUE INDEX event_log_primary_idx ON event_log (delivery_id) WHERE is_primary = 1;
{{- end}}
