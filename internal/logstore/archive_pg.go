package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// archived implements archiveBackend: the head row's archive column.
func (p *PG) archived(runID, jobID string, step int) (*archiveMarker, error) {
	if err := checkKey(runID, jobID, step); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	var raw *string
	err := p.pool.QueryRow(ctx, `SELECT archive FROM step_log_heads WHERE job_id = $1 AND step_index = $2 AND run_id = $3`,
		jobID, step, runID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && raw == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	var m archiveMarker
	if err := json.Unmarshal([]byte(*raw), &m); err != nil {
		return nil, fmt.Errorf("logstore: archive marker of job %s step %d: %w", jobID, step, err)
	}
	return &m, nil
}

// liveState implements archiveBackend: the head row's counts.
func (p *PG) liveState(runID, jobID string, step int) (lines, agentOffset int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	err = p.pool.QueryRow(ctx, `SELECT lines, agent_offset FROM step_log_heads WHERE job_id = $1 AND step_index = $2 AND run_id = $3`,
		jobID, step, runID).Scan(&lines, &agentOffset)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("logstore: %w", err)
	}
	return lines, agentOffset, nil
}

// commitArchive implements archiveBackend: in one transaction, with the
// head row locked, the marker is recorded and the step's chunks deleted,
// unless the step grew since it was read.
func (p *PG) commitArchive(runID, jobID string, step int, m archiveMarker) (bool, error) {
	if archiveCrashHook != nil {
		if err := archiveCrashHook(); err != nil {
			return false, err
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	ok := false
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var lines int64
		var archived bool
		err := tx.QueryRow(ctx, `SELECT lines, archive IS NOT NULL FROM step_log_heads
			WHERE job_id = $1 AND step_index = $2 AND run_id = $3 FOR UPDATE`, jobID, step, runID).Scan(&lines, &archived)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if archived {
			ok = true
			return nil
		}
		if lines != m.Lines {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE step_log_heads SET archive = $3 WHERE job_id = $1 AND step_index = $2`,
			jobID, step, string(raw)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM step_log_chunks WHERE job_id = $1 AND step_index = $2`, jobID, step); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("logstore: record archive: %w", err)
	}
	return ok, nil
}

// archiving implements archiveBackend (the database finds pending logs
// itself).
func (p *PG) archiving() {}

// pendingArchive implements archiveBackend: live heads untouched since
// cutoff, oldest first.
func (p *PG) pendingArchive(cutoff time.Time, offset, limit int) ([]StepRef, error) {
	return p.stepRefs(`SELECT run_id, job_id, step_index FROM step_log_heads
		WHERE archive IS NULL AND updated_at < $1 AND lines > 0 ORDER BY updated_at OFFSET $2 LIMIT $3`, cutoff.UTC(), offset, limit)
}

// archivedInRun implements archiveBackend.
func (p *PG) archivedInRun(runID string) ([]StepRef, error) {
	return p.stepRefs(`SELECT run_id, job_id, step_index FROM step_log_heads WHERE run_id = $1 AND archive IS NOT NULL`, runID)
}

func (p *PG) stepRefs(q string, args ...any) ([]StepRef, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StepRef, error) {
		var s StepRef
		err := r.Scan(&s.RunID, &s.JobID, &s.Step)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	return refs, nil
}
