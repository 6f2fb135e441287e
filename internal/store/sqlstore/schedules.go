package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

// ReleaseLease drops the lease if holder holds it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := s.exec(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
	return mapErr(err)
}

// RecordScheduleFire records the instant; false when it already was.
func (s *Store) RecordScheduleFire(ctx context.Context, key string, at time.Time) (bool, error) {
	return changed(s.exec(ctx, `INSERT INTO schedule_fires (schedule_key, instant, fired_at) VALUES (?, ?, ?)
		ON CONFLICT (schedule_key, instant) DO NOTHING`, key, s.d.ts(at), s.d.ts(now())))
}

// LastScheduleFire returns the latest recorded instant of key (zero: none).
func (s *Store) LastScheduleFire(ctx context.Context, key string) (time.Time, error) {
	var v *time.Time
	if err := s.queryRow(ctx, `SELECT MAX(instant) FROM schedule_fires WHERE schedule_key = ?`, key).Scan(ntcol(&v)); err != nil {
		return time.Time{}, mapErr(err)
	}
	if v == nil {
		return time.Time{}, nil
	}
	return *v, nil
}

// RecordMissed inserts a non-primary event-log entry with status missed.
func (s *Store) RecordMissed(ctx context.Context, e *store.EventLogEntry) error {
	e.Status = store.EventLogMissed
	return insertEventLog(ctx, s.conn, e, false)
}
