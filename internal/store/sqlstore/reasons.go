package sqlstore

import (
	"context"
	"slices"
)

// SetPendingReasons writes the reasons: on PostgreSQL as one UPDATE over
// unnest'ed arrays, one round trip whatever the number of jobs, which
// locks the rows in id order first (FOR UPDATE under an ORDER BY), so two
// nodes writing overlapping batches queue instead of deadlocking; on
// SQLite as one UPDATE per job, in id order, in one transaction: one turn
// of the single writer.
func (s *Store) SetPendingReasons(ctx context.Context, reasons map[string]string) error {
	if len(reasons) == 0 {
		return nil
	}
	ids := make([]string, 0, len(reasons))
	for id := range reasons {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	const cond = `(v.reason = '' OR j.status = 'queued')`
	if s.d.Postgres {
		texts := make([]string, len(ids))
		for i, id := range ids {
			texts[i] = reasons[id]
		}
		_, err := s.exec(ctx, `UPDATE execution_jobs AS j SET pending_reason = v.reason
			FROM (SELECT u.id, u.reason FROM unnest(?::text[], ?::text[]) AS u(id, reason)
				JOIN execution_jobs k ON k.id = u.id ORDER BY u.id FOR UPDATE OF k) AS v
			WHERE j.id = v.id AND `+cond, ids, texts)
		return mapErr(err)
	}
	return s.tx(ctx, func(c conn) error {
		for _, id := range ids {
			if _, err := c.exec(ctx, `UPDATE execution_jobs AS j SET pending_reason = v.reason
				FROM (SELECT ? AS id, ? AS reason) AS v WHERE j.id = v.id AND `+cond, id, reasons[id]); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}
