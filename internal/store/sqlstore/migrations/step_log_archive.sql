-- +goose NO TRANSACTION
-- +goose Up
-- Step logs archived to the blob store and the per-step size cap
-- (internal/logstore Archived, KICI_STEP_LOG_MAX_BYTES). archive holds the
-- archive's marker (JSON: lines, agent offset, index digest) once the
-- step's lines were written to the blob store; its step_log_chunks rows
-- are deleted in the same transaction. bytes is what the step's chunks
-- hold and capped whether the size cap's marker line is stored. Built
-- CONCURRENTLY (and dropped first, should a build have been cut): the
-- archiver looks for live logs that went quiet.
ALTER TABLE step_log_heads ADD COLUMN IF NOT EXISTS bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE step_log_heads ADD COLUMN IF NOT EXISTS capped BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE step_log_heads ADD COLUMN IF NOT EXISTS archive TEXT;
DROP INDEX CONCURRENTLY IF EXISTS step_log_heads_unarchived;
CREATE INDEX CONCURRENTLY step_log_heads_unarchived ON step_log_heads (updated_at) WHERE archive IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS step_log_heads_unarchived;
ALTER TABLE step_log_heads DROP COLUMN archive;
ALTER TABLE step_log_heads DROP COLUMN capped;
ALTER TABLE step_log_heads DROP COLUMN bytes;
