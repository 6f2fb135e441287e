-- +goose Up
-- Schedule instants fired (one row per schedule and instant, never two):
-- a scheduler taking the lease reads the latest one to find the instants
-- that fell due while nobody held it.
CREATE TABLE schedule_fires (
    schedule_key TEXT NOT NULL,
    instant      {{.Time}} NOT NULL,
    fired_at     {{.Time}} NOT NULL,
    PRIMARY KEY (schedule_key, instant)
);

-- +goose Down
DROP TABLE schedule_fires;
