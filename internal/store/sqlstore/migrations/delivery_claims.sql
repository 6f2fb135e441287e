-- +goose Up
-- A delivery is processed by one node at a time: the node holding the
-- claim (claimed_by, a node id) until claim_expires_at, renewed while it
-- processes and cleared when the delivery is finished.
ALTER TABLE deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE deliveries ADD COLUMN claim_expires_at {{.Time}};

-- +goose Down
ALTER TABLE deliveries DROP COLUMN claim_expires_at;
ALTER TABLE deliveries DROP COLUMN claimed_by;
