package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

// SweepExpired deletes up to limit expired rows of kind in one short
// transaction (store.RetentionStore). The batch is chosen with FOR UPDATE
// SKIP LOCKED, so a sweep never waits on, nor blocks, a row that ingest or
// dispatch holds. Child rows go by ON DELETE CASCADE; a deleted run's queue
// entries are removed in the same transaction.
func (s *Store) SweepExpired(ctx context.Context, kind string, before, keepAttestedAfter time.Time, limit int) (int, []string, error) {
	if limit <= 0 {
		limit = store.DefaultSweepBatch
	}
	before = before.UTC()
	switch kind {
	case store.SweepRuns:
		var ids []string
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `DELETE FROM execution_runs WHERE id IN (
				SELECT r.id FROM execution_runs r
				WHERE r.status IN ('success', 'failed', 'cancelled') AND r.completed_at IS NOT NULL AND r.completed_at < $1
				  AND NOT EXISTS (SELECT 1 FROM provenance_attestations p WHERE p.run_id = r.id AND p.created_at >= $2)
				LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id`, before, keepAttestedAfter.UTC(), limit)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				if _, err := tx.Exec(ctx, `DELETE FROM dispatch_queue WHERE run_id = ANY($1)`, ids); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, nil, err
		}
		return len(ids), ids, nil
	case store.SweepDeliveries:
		n := 0
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for _, q := range []string{
				`DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE status <> 'received' AND received_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
				`DELETE FROM event_log WHERE id IN (SELECT id FROM event_log WHERE received_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
				`DELETE FROM rejected_deliveries WHERE ctid IN (SELECT ctid FROM rejected_deliveries WHERE received_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
			} {
				tag, err := tx.Exec(ctx, q, before, limit)
				if err != nil {
					return err
				}
				n += int(tag.RowsAffected())
			}
			return nil
		})
		return n, nil, err
	}
	q, ok := map[string]string{
		store.SweepAudit:      `DELETE FROM access_log WHERE id IN (SELECT id FROM access_log WHERE at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		store.SweepProvenance: `DELETE FROM provenance_attestations WHERE id IN (SELECT id FROM provenance_attestations WHERE created_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		store.SweepHeldRuns: `DELETE FROM held_runs WHERE id IN (SELECT id FROM held_runs
			WHERE status <> 'pending' AND COALESCE(resolved_at, expires_at) < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		store.SweepQueue: `DELETE FROM dispatch_queue WHERE id IN (SELECT id FROM dispatch_queue
			WHERE status IN ('completed', 'failed', 'expired') AND created_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}[kind]
	if !ok {
		return 0, nil, fmt.Errorf("postgres: unknown retention kind %q", kind)
	}
	tag, err := s.pool.Exec(ctx, q, before, limit)
	if err != nil {
		return 0, nil, err
	}
	return int(tag.RowsAffected()), nil, nil
}
