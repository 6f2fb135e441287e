-- +goose Up
-- Check runs and commit statuses posted to forges (KiCI check_run_tracking):
-- one row per job, holding the state kici wants the forge to show and what
-- the forge last accepted, so a restart neither duplicates a check nor loses
-- its final state. Swept after checkRunTrackingTtlDays.
CREATE TABLE check_run_tracking (
    job_id              TEXT PRIMARY KEY,
    run_id              TEXT NOT NULL,
    source_id           TEXT NOT NULL,
    provider            TEXT NOT NULL,
    repo                TEXT NOT NULL,
    sha                 TEXT NOT NULL,
    name                TEXT NOT NULL,
    external_id         TEXT NOT NULL DEFAULT '',
    desired_state       TEXT NOT NULL,
    desired_body        {{.Bytes}} NOT NULL,
    desired_hash        TEXT NOT NULL,
    desired_terminal    {{.Bool}} NOT NULL,
    desired_at          {{.Time}} NOT NULL,
    posted_state        TEXT NOT NULL DEFAULT '',
    posted_hash         TEXT NOT NULL DEFAULT '',
    posted_at           {{.Time}},
    create_attempted_at {{.Time}},
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     {{.Time}},
    gave_up_hash        TEXT NOT NULL DEFAULT '',
    last_error          TEXT NOT NULL DEFAULT '',
    last_status_code    INTEGER NOT NULL DEFAULT 0,
    created_at          {{.Time}} NOT NULL,
    updated_at          {{.Time}} NOT NULL
);
CREATE INDEX check_run_tracking_sha_idx ON check_run_tracking (sha);
CREATE INDEX check_run_tracking_run_idx ON check_run_tracking (run_id);
CREATE INDEX check_run_tracking_updated_idx ON check_run_tracking (updated_at);

-- +goose Down
DROP TABLE check_run_tracking;
