-- +goose Up
-- Step outputs a job exported (name → value, after masking), read by the
-- jobs that need it as needs.<job>.outputs.<name>.
CREATE TABLE execution_job_outputs (
    job_id  TEXT PRIMARY KEY REFERENCES execution_jobs (id) ON DELETE CASCADE,
    run_id  TEXT NOT NULL REFERENCES execution_runs (id) ON DELETE CASCADE,
    outputs TEXT NOT NULL
);
CREATE INDEX execution_job_outputs_run_idx ON execution_job_outputs (run_id);

-- What a run's conditions see beyond the run row: a manual or scheduled
-- run's inputs and the event's changed paths (JSON).
CREATE TABLE execution_run_context (
    run_id        TEXT PRIMARY KEY REFERENCES execution_runs (id) ON DELETE CASCADE,
    inputs        TEXT NOT NULL,
    changed_paths TEXT NOT NULL
);

-- +goose Down
DROP TABLE execution_run_context;
DROP TABLE execution_job_outputs;
