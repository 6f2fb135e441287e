package logstore

import (
	"context"
	"fmt"
	"time"
)

// RemoveRun implements Store: every chunk and head row of the run.
func (p *PG) RemoveRun(runID string) error {
	if !idPattern.MatchString(runID) {
		return fmt.Errorf("%w: run id %q", ErrInvalidPath, runID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	if _, err := p.pool.Exec(ctx, `DELETE FROM step_log_chunks WHERE run_id = $1`, runID); err != nil {
		return fmt.Errorf("logstore: remove run: %w", err)
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM step_log_heads WHERE run_id = $1`, runID); err != nil {
		return fmt.Errorf("logstore: remove run: %w", err)
	}
	return nil
}

// SweepOlderThan implements Store: the runs whose every step log was last
// appended to before cutoff, at most limit of them. A run still being
// written to is never cleared: its heads keep moving.
func (p *PG) SweepOlderThan(cutoff time.Time, limit int) ([]string, error) {
	return p.sweepOlderThan(cutoff, limit, nil)
}

// sweepOlderThan is SweepOlderThan calling before (when set) with each run
// about to be cleared; an error from it leaves the run in place.
func (p *PG) sweepOlderThan(cutoff time.Time, limit int, before func(runID string) error) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT run_id FROM step_log_heads GROUP BY run_id
		HAVING max(updated_at) < $1 ORDER BY max(updated_at) LIMIT $2`, cutoff.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("logstore: sweep: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("logstore: sweep: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("logstore: sweep: %w", err)
	}
	var swept []string
	for _, id := range ids {
		if before != nil {
			if err := before(id); err != nil {
				return swept, err
			}
		}
		if err := p.RemoveRun(id); err != nil {
			return swept, err
		}
		swept = append(swept, id)
	}
	return swept, nil
}
