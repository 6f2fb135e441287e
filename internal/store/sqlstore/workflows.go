package sqlstore

import (
	"context"
	"encoding/json"

	"kici.dev/kici/internal/store"
)

var _ store.WorkflowDataStore = (*Store)(nil)

// PutJobOutputs upserts a job's outputs; ErrNotFound for an unknown job.
func (s *Store) PutJobOutputs(ctx context.Context, jobID string, outputs map[string]string) error {
	b, err := json.Marshal(outputs)
	if err != nil {
		return err
	}
	res, err := s.exec(ctx, `INSERT INTO execution_job_outputs (job_id, run_id, outputs)
		SELECT id, run_id, ? FROM execution_jobs WHERE id = ?
		ON CONFLICT (job_id) DO UPDATE SET outputs = excluded.outputs`, string(b), jobID)
	if err != nil {
		return mapErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ListJobOutputs returns a run's job outputs by job id.
func (s *Store) ListJobOutputs(ctx context.Context, runID string) (map[string]map[string]string, error) {
	rows, err := s.query(ctx, jobOutputsQuery, runID)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	return scanOutputs(rows)
}

// PutRunContext upserts a run's context; ErrNotFound for an unknown run.
func (s *Store) PutRunContext(ctx context.Context, runID string, rc *store.RunContext) error {
	return putRunContext(ctx, s.conn, runID, rc)
}

func putRunContext(ctx context.Context, q conn, runID string, rc *store.RunContext) error {
	in, paths, err := store.EncodeRunContext(rc)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `INSERT INTO execution_run_context (run_id, inputs, changed_paths) VALUES (?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET inputs = excluded.inputs, changed_paths = excluded.changed_paths`, runID, in, paths)
	return mapErr(err)
}

// GetRunContext returns a run's context, or ErrNotFound.
func (s *Store) GetRunContext(ctx context.Context, runID string) (*store.RunContext, error) {
	return scanRunContext(s.queryRow(ctx, runContextQuery, runID))
}
