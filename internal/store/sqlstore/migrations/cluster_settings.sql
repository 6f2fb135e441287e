-- +goose Up
-- Live cluster settings: one row per overridden knob (absent = default),
-- plus a version row bumped on every real change.
CREATE TABLE cluster_settings (
    name       TEXT PRIMARY KEY,
    value      BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE cluster_settings;
