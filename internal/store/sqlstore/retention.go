package sqlstore

import (
	"context"
	"fmt"
	"time"

	"kici.dev/kici/internal/store"
)

// SweepExpired deletes up to limit expired rows of kind in one short
// transaction (store.RetentionStore). On PostgreSQL the batch is chosen
// with FOR UPDATE SKIP LOCKED, so a sweep never waits on, nor blocks, a row
// that ingest or dispatch holds. Child rows go by ON DELETE CASCADE;
// a deleted run's queue entries are removed in the same transaction.
func (s *Store) SweepExpired(ctx context.Context, kind string, before, keepAttestedAfter time.Time, limit int) (int, []string, error) {
	if limit <= 0 {
		limit = store.DefaultSweepBatch
	}
	cut := s.d.ts(before)
	skip := s.d.skipLocked()
	switch kind {
	case store.SweepRuns:
		var ids []string
		err := s.tx(ctx, func(tx conn) error {
			rows, err := tx.query(ctx, `DELETE FROM execution_runs WHERE id IN (
				SELECT r.id FROM execution_runs r
				WHERE r.status IN ('success', 'failed', 'cancelled') AND r.completed_at IS NOT NULL AND r.completed_at < ?1
				  AND NOT EXISTS (SELECT 1 FROM provenance_attestations p WHERE p.run_id = r.id AND p.created_at >= ?2)
				LIMIT ?3`+skip+`) RETURNING id`, cut, s.d.ts(keepAttestedAfter), limit)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			rows.Close()
			for _, id := range ids {
				if _, err := tx.exec(ctx, `DELETE FROM dispatch_queue WHERE run_id = ?`, id); err != nil {
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
		err := s.tx(ctx, func(tx conn) error {
			for _, q := range []string{
				`DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE status <> 'received' AND received_at < ?1 LIMIT ?2` + skip + `)`,
				`DELETE FROM event_log WHERE id IN (SELECT id FROM event_log WHERE received_at < ?1 LIMIT ?2` + skip + `)`,
				`DELETE FROM rejected_deliveries WHERE ` + s.d.rowID() + ` IN (SELECT ` + s.d.rowID() + ` FROM rejected_deliveries WHERE received_at < ?1 LIMIT ?2` + skip + `)`,
			} {
				res, err := tx.exec(ctx, q, cut, limit)
				if err != nil {
					return err
				}
				k, _ := res.RowsAffected()
				n += int(k)
			}
			return nil
		})
		return n, nil, err
	}
	q, ok := map[string]string{
		store.SweepAudit:      `DELETE FROM access_log WHERE id IN (SELECT id FROM access_log WHERE at < ?1 LIMIT ?2` + skip + `)`,
		store.SweepProvenance: `DELETE FROM provenance_attestations WHERE id IN (SELECT id FROM provenance_attestations WHERE created_at < ?1 LIMIT ?2` + skip + `)`,
		store.SweepHeldRuns: `DELETE FROM held_runs WHERE id IN (SELECT id FROM held_runs
			WHERE status <> 'pending' AND COALESCE(resolved_at, expires_at) < ?1 LIMIT ?2` + skip + `)`,
		store.SweepQueue: `DELETE FROM dispatch_queue WHERE id IN (SELECT id FROM dispatch_queue
			WHERE status IN ('completed', 'failed', 'expired') AND created_at < ?1 LIMIT ?2` + skip + `)`,
	}[kind]
	if !ok {
		return 0, nil, fmt.Errorf("%s: unknown retention kind %q", s.d.Name, kind)
	}
	res, err := s.exec(ctx, q, cut, limit)
	if err != nil {
		return 0, nil, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil, nil
}
