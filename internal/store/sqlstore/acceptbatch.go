package sqlstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// On SQLite accepts are committed in groups. A burst of webhooks otherwise
// pays one turn of the single writer each, and the answer of each waits
// behind the others' turns. So concurrent AcceptDelivery calls queue; the
// first to find no group in progress leads: it writes every call queued so
// far (up to maxAcceptGroup, its own first) in one transaction, wakes them,
// and hands the lead to the first call that queued meanwhile. A lone call
// is a group of one, written as before. Every call still returns only once
// its own delivery is committed (or refused), so a 202 always means stored.
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

// acceptQueue is the Store's queue of AcceptDelivery calls.
type acceptQueue struct {
	mu      sync.Mutex
	pending []*acceptCall
	leading bool // a call is writing a group
}

// acceptCall is one AcceptDelivery waiting for its group.
type acceptCall struct {
	d    *store.Delivery
	e    *store.EventLogEntry
	err  error
	done chan struct{} // closed once err is final
	lead chan struct{} // closed to make this call lead the next group
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
	c := &acceptCall{d: d, e: e, done: make(chan struct{}), lead: make(chan struct{})}
	if s.d.Postgres {
		return s.acceptOne(ctx, c)
	}
	q := &s.accepts
	q.mu.Lock()
	q.pending = append(q.pending, c)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		select {
		case <-c.done:
			return c.err
		case <-c.lead:
		}
	}
	s.leadAcceptGroup(ctx)
	<-c.done
	return c.err
}

// leadAcceptGroup writes the calls queued now (the leader's own is first)
// as one group, then passes the lead on or ends it.
func (s *Store) leadAcceptGroup(ctx context.Context) {
	q := &s.accepts
	q.mu.Lock()
	n := min(len(q.pending), maxAcceptGroup)
	group := q.pending[:n:n]
	q.pending = append([]*acceptCall(nil), q.pending[n:]...)
	q.mu.Unlock()

	ctx, cancel := context.WithTimeout(WithWritePriority(context.WithoutCancel(ctx)), acceptGroupTimeout)
	s.writeAcceptGroup(ctx, group)
	cancel()
	for _, c := range group {
		close(c.done)
	}

	q.mu.Lock()
	if len(q.pending) > 0 {
		close(q.pending[0].lead)
	} else {
		q.leading = false
	}
	q.mu.Unlock()
}

// writeAcceptGroup stores each call's delivery and entry in one
// transaction, setting ErrConflict on calls whose id exists. When the
// transaction fails, each call is retried in a transaction of its own, so
// only a call whose own rows are at fault fails.
func (s *Store) writeAcceptGroup(ctx context.Context, group []*acceptCall) {
	if len(group) > 1 {
		err := s.tx(ctx, func(tx conn) error {
			for _, c := range group {
				c.err = nil
				res, err := tx.exec(ctx, insertDelivery+` ON CONFLICT (id) DO NOTHING`, deliveryArgs(s.d, c.d)...)
				if err != nil {
					return mapErr(err)
				}
				if n, err := res.RowsAffected(); err != nil {
					return err
				} else if n == 0 {
					c.err = store.ErrConflict
					continue
				}
				if err := insertAcceptEntry(ctx, tx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return
		}
	}
	for _, c := range group {
		c.err = s.tx(ctx, func(tx conn) error {
			if _, err := tx.exec(ctx, insertDelivery, deliveryArgs(s.d, c.d)...); err != nil {
				return mapErr(err)
			}
			return insertAcceptEntry(ctx, tx, c)
		})
	}
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
func insertAcceptEntry(ctx context.Context, tx conn, c *acceptCall) error {
	c.e.DeliveryID, c.e.Status, c.e.ReceivedAt = c.d.ID, store.EventLogReceived, c.d.ReceivedAt
	return insertEventLog(ctx, tx, c.e, true)
}

// acceptOne stores a call's delivery and its primary event-log entry on
// PostgreSQL in one statement (a data-modifying WITH), which the server
// runs atomically: one round trip where a transaction took four (BEGIN,
// two INSERTs, COMMIT). A taken delivery id fails the whole statement on
// the primary key: ErrConflict, and no entry is written.
func (s *Store) acceptOne(ctx context.Context, c *acceptCall) error {
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
