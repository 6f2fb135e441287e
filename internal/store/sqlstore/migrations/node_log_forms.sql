-- +goose Up
-- Whether each node reads step-log chunks stored compressed
-- (internal/logstore/pgchunk.go): the node's started_at when the node
-- that wrote its row reads them, else NULL. A node of an older release
-- never writes the column but rewrites started_at at every heartbeat, so
-- a value left by a newer process of the same node id no longer matches
-- and the node counts as one that does not read them. Nodes compress the
-- chunks they write only while every live node reads them.
ALTER TABLE cluster_nodes ADD COLUMN compressed_logs_since {{.Time}};

-- +goose Down
-- The Down migration alone would leave compressed chunks an older release
-- cannot read: `migrate down-to` below this version first rewrites them
-- plain (logstore.PlainChunks).
ALTER TABLE cluster_nodes DROP COLUMN compressed_logs_since;
