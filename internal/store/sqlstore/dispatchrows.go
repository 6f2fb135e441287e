package sqlstore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

// A job's dispatch is built from four reads of its run: the run, its jobs
// (the job itself among them), its context and its outputs. On
// PostgreSQL they go in one pipeline, one network exchange with the
// server, where one after the other they were four, with the job read on
// its own before them a fifth; on SQLite they stay in-process reads.

const (
	runByIDQuery    = `SELECT ` + runCols + ` FROM execution_runs WHERE id = ?`
	jobsOfRunQuery  = `SELECT ` + jobSelectCols + ` FROM execution_jobs WHERE run_id = ? ORDER BY seq`
	runContextQuery = `SELECT inputs, changed_paths FROM execution_run_context WHERE run_id = ?`
	jobOutputsQuery = `SELECT job_id, outputs FROM execution_job_outputs WHERE run_id = ?`
)

// scanOutputs reads rows of (job id, outputs as a JSON object).
func scanOutputs(rows rowSource) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, mapErr(err)
		}
		m := map[string]string{}
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, mapErr(rows.Err())
}

// scanRunContext reads a run context row; ErrNotFound when there is none.
func scanRunContext(r scanner) (*store.RunContext, error) {
	var in, paths string
	if err := r.Scan(&in, &paths); err != nil {
		return nil, mapErr(err)
	}
	return store.DecodeRunContext(in, paths)
}

// DispatchRows implements store.WorkflowDataStore.
func (s *Store) DispatchRows(ctx context.Context, runID, jobID string) (*store.DispatchRows, error) {
	var d *store.DispatchRows
	err := errNoPipeline
	if s.d.Postgres {
		d, err = s.dispatchRowsPipelined(ctx, runID)
	}
	if errors.Is(err, errNoPipeline) {
		d, err = s.dispatchRowsOneByOne(ctx, runID)
	}
	if err != nil {
		return nil, err
	}
	for _, j := range d.Jobs {
		if j.ID == jobID {
			d.Job = j
			return d, nil
		}
	}
	return nil, store.ErrNotFound
}

// dispatchRowsOneByOne runs the four reads one after the other.
func (s *Store) dispatchRowsOneByOne(ctx context.Context, runID string) (*store.DispatchRows, error) {
	run, err := scanRun(s.queryRow(ctx, runByIDQuery, runID))
	if err != nil {
		return nil, err
	}
	d := &store.DispatchRows{Run: run}
	if d.Jobs, err = s.ListJobs(ctx, runID); err != nil {
		return nil, err
	}
	if d.Context, err = s.GetRunContext(ctx, runID); errors.Is(err, store.ErrNotFound) {
		d.Context, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if d.Outputs, err = s.ListJobOutputs(ctx, runID); err != nil {
		return nil, err
	}
	return d, nil
}

// dispatchRowsPipelined sends the four reads in one pgx batch and reads
// their results in order; errNoPipeline when the connection is not pgx's.
func (s *Store) dispatchRowsPipelined(ctx context.Context, runID string) (*store.DispatchRows, error) {
	var d *store.DispatchRows
	err := s.onPgx(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, q := range []string{runByIDQuery, jobsOfRunQuery, runContextQuery, jobOutputsQuery} {
			b.Queue(s.d.rebind(q), runID)
		}
		br := pc.SendBatch(ctx, b)
		var err error
		d, err = readDispatchBatch(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return d, nil
}

// readDispatchBatch reads the results of dispatchRowsPipelined's batch, in
// the order it queued them.
func readDispatchBatch(br pgx.BatchResults) (*store.DispatchRows, error) {
	run, err := scanRun(br.QueryRow())
	if err != nil {
		return nil, err
	}
	d := &store.DispatchRows{Run: run}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	d.Jobs, err = scanEach(rows, scanJob)
	rows.Close()
	if err != nil {
		return nil, err
	}
	if d.Context, err = scanRunContext(br.QueryRow()); errors.Is(err, store.ErrNotFound) {
		d.Context, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	d.Outputs, err = scanOutputs(rows)
	rows.Close()
	return d, err
}
