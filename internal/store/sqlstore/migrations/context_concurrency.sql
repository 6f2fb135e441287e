-- +goose Up
-- Context concurrency limits (KiCI contexts.concurrency_limit): the limit
-- on the context row (NULL = no limit) and the slots jobs hold in a
-- concurrency group. job_id is not a foreign key: a slot whose job is gone
-- or terminal simply stops counting and is deleted on a later acquire.
ALTER TABLE contexts ADD COLUMN concurrency_limit {{.Int}};

CREATE TABLE context_slots (
    org_id      TEXT NOT NULL,
    grp         TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    acquired_at {{.Time}} NOT NULL,
    PRIMARY KEY (org_id, grp, job_id)
);

-- +goose Down
DROP TABLE context_slots;
ALTER TABLE contexts DROP COLUMN concurrency_limit;
