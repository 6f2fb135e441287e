-- +goose Up
-- Where an organization-wide workflow was defined ("<org>/<source>@<sha>:
-- <file>"), for a run it made in another source of its org; '' for a run
-- of the repository's own workflow.
ALTER TABLE execution_runs ADD COLUMN workflow_origin TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE execution_runs DROP COLUMN workflow_origin;
