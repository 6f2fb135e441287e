package sqlstore

import (
	"context"
	"strings"
	"time"

	"kici.dev/kici/internal/groupcommit"
	"kici.dev/kici/internal/store"
)

// On SQLite accepts are committed in groups (package groupcommit). A burst
// of webhooks otherwise pays one turn of the single writer each, and the
// answer of each waits behind the others' turns. A lone call is a group of
// one, written as before. Every call still returns only once its own
// delivery is committed (or refused), so a 202 always means stored.
//
// PostgreSQL writes concurrently: there each call is its own transaction,
// since a group would serialise what the server runs in parallel (with 16
// concurrent senders, grouping halved the accepted/s and doubled the
// median answer time).

// maxAcceptGroup bounds one group's transaction.
const maxAcceptGroup = 64

// acceptGroupTimeout bounds a group's transaction: the leader's request
// context is not used, since its sender hanging up must not fail the
// others' deliveries.
const acceptGroupTimeout = 30 * time.Second

// acceptCall is one AcceptDelivery's rows.
type acceptCall struct {
	d *store.Delivery
	e *store.EventLogEntry
}

// newAcceptQueue is the Store's queue of AcceptDelivery calls on SQLite.
func (s *Store) newAcceptQueue() *groupcommit.Queue[acceptCall] {
	return &groupcommit.Queue[acceptCall]{Max: maxAcceptGroup, Write: func(ctx context.Context, group []acceptCall) []error {
		ctx, cancel := context.WithTimeout(WithWritePriority(context.WithoutCancel(ctx)), acceptGroupTimeout)
		defer cancel()
		return s.writeAcceptGroup(ctx, group)
	}}
}

// AcceptDelivery inserts the delivery (status received) and its primary
// event-log entry, atomically, on SQLite grouped with concurrent calls
// (see above);
// ErrConflict when the delivery id exists. On SQLite its write goes ahead
// of waiting background writes (WithWritePriority).
func (s *Store) AcceptDelivery(ctx context.Context, d *store.Delivery, e *store.EventLogEntry) error {
	d.Status = store.DeliveryReceived
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = now()
	}
	c := acceptCall{d: d, e: e}
	if s.d.Postgres {
		return s.acceptOne(ctx, c)
	}
	return s.accepts.Do(ctx, c)
}

// writeAcceptGroup stores each call's delivery and entry in one
// transaction, answering ErrConflict for calls whose id exists. When the
// transaction fails, each call is retried in a transaction of its own, so
// only a call whose own rows are at fault fails.
func (s *Store) writeAcceptGroup(ctx context.Context, group []acceptCall) []error {
	errs := make([]error, len(group))
	if len(group) > 1 {
		err := s.tx(ctx, func(tx conn) error {
			for i, c := range group {
				errs[i] = nil
				res, err := tx.exec(ctx, insertDelivery+` ON CONFLICT (id) DO NOTHING`, deliveryArgs(s.d, c.d)...)
				if err != nil {
					return mapErr(err)
				}
				if n, err := res.RowsAffected(); err != nil {
					return err
				} else if n == 0 {
					errs[i] = store.ErrConflict
					continue
				}
				if err := insertAcceptEntry(ctx, tx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return errs
		}
	}
	for i, c := range group {
		errs[i] = s.tx(ctx, func(tx conn) error {
			if _, err := tx.exec(ctx, insertDelivery, deliveryArgs(s.d, c.d)...); err != nil {
				return mapErr(err)
			}
			return insertAcceptEntry(ctx, tx, c)
		})
	}
	return errs
}

// deliveryArgs are d's values in insertDelivery's order: deliveryCols,
// then its claim (both NULL when ClaimedBy is empty).
func deliveryArgs(dl *Dialect, d *store.Delivery) []any {
	var payload, claimedBy, claimExpires any
	if len(d.Payload) > 0 {
		payload = []byte(d.Payload)
	}
	if d.ClaimedBy != "" {
		claimedBy, claimExpires = d.ClaimedBy, dl.ts(d.ClaimExpiresAt)
	}
	return []any{d.ID, d.SourceID, d.OrgID, d.Event, payload, d.Status, d.Error, rawArg(d.Decisions),
		dl.ts(d.ReceivedAt), dl.tsPtr(d.ProcessedAt), claimedBy, claimExpires}
}

// insertAcceptEntry writes an accepted delivery's primary event-log entry.
func insertAcceptEntry(ctx context.Context, tx conn, c acceptCall) error {
	c.e.DeliveryID, c.e.Status, c.e.ReceivedAt = c.d.ID, store.EventLogReceived, c.d.ReceivedAt
	return insertEventLog(ctx, tx, c.e, true)
}

// acceptOne stores a call's delivery and its primary event-log entry on
// PostgreSQL in one statement (a data-modifying WITH), which the server
// runs atomically: one round trip where a transaction took four (BEGIN,
// two INSERTs, COMMIT). A taken delivery id fails the whole statement on
// the primary key: ErrConflict, and no entry is written.
func (s *Store) acceptOne(ctx context.Context, c acceptCall) error {
	e := c.e
	e.DeliveryID, e.Status, e.ReceivedAt = c.d.ID, store.EventLogReceived, c.d.ReceivedAt
	entryArgs := eventLogArgs(s.d, e, true)
	_, err := s.exec(ctx, `WITH d AS (`+insertDelivery+` RETURNING id)
		INSERT INTO event_log (is_primary, `+eventLogCols+`) SELECT `+placeholders(len(entryArgs))+` FROM d`,
		append(deliveryArgs(s.d, c.d), entryArgs...)...)
	return mapErr(err)
}

// placeholders is n comma-separated ? placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
