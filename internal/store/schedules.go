package store

import (
	"context"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// EventLogMissed is the event-log status of schedule instants that fell
// due while no scheduler held the lease and were older than the catch-up
// window: they were not fired, and say so instead of vanishing.
const EventLogMissed = apitypes.EventLogMissed

// ScheduleStore is what the scheduler keeps across leaders: the lease
// release of a graceful stop, and the instants each schedule fired, so a
// new leader knows what fell due while nobody held the lease.
type ScheduleStore interface {
	// ReleaseLease drops the named lease if holder holds it (a graceful
	// stop: another node takes over at its next tick instead of after the
	// TTL). Releasing a lease held by someone else changes nothing.
	ReleaseLease(ctx context.Context, name, holder string) error
	// RecordScheduleFire records that the schedule key fired its instant
	// at (unique on key and instant). It reports false when that instant
	// was already recorded, by this node or another.
	RecordScheduleFire(ctx context.Context, key string, at time.Time) (bool, error)
	// LastScheduleFire returns the latest recorded instant of key, or the
	// zero time when it never fired.
	LastScheduleFire(ctx context.Context, key string) (time.Time, error)
	// RecordMissed inserts a non-primary event-log entry with status
	// missed (e.Status is overwritten).
	RecordMissed(ctx context.Context, e *EventLogEntry) error
}
