-- +goose Up
-- Enqueue numbers an entry MAX(seq) + 1; without an index that read the
-- whole queue table (every entry ever queued, until retention) on each
-- enqueue, while holding the database's single writer.
CREATE INDEX dispatch_queue_seq_idx ON dispatch_queue (seq);

-- +goose Down
DROP INDEX dispatch_queue_seq_idx;
