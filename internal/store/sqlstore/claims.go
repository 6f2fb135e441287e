package sqlstore

import (
	"context"
	"errors"
	"time"

	"kici.dev/kici/internal/store"
)

// ClaimDelivery takes or renews holder's lease on a delivery still
// "received" (store.DeliveryClaimStore). The single conditional UPDATE is
// the claim: of two nodes racing for one row, PostgreSQL's row lock and
// SQLite's single writer let exactly one see it change.
func (s *Store) ClaimDelivery(ctx context.Context, id, holder string, ttl time.Duration) (bool, error) {
	at := now()
	return changed(s.exec(ctx, `UPDATE deliveries SET claimed_by = ?1, claim_expires_at = ?2
		WHERE id = ?3 AND status = ?4 AND (claimed_by IS NULL OR claimed_by = ?1 OR claim_expires_at <= ?5)`,
		holder, s.d.ts(at.Add(ttl)), id, store.DeliveryReceived, s.d.ts(at)))
}

// TakeDelivery claims like ClaimDelivery and returns the claimed row and
// whether runs naming the delivery are stored already, all in the one
// UPDATE … RETURNING; nil, false, nil when the claim was not given.
func (s *Store) TakeDelivery(ctx context.Context, id, holder string, ttl time.Duration) (*store.Delivery, bool, error) {
	at := now()
	var runs bool
	d, err := scanDelivery(trailing{s.queryRow(ctx, `UPDATE deliveries SET claimed_by = ?1, claim_expires_at = ?2
		WHERE id = ?3 AND status = ?4 AND (claimed_by IS NULL OR claimed_by = ?1 OR claim_expires_at <= ?5)
		RETURNING `+deliveryCols+`, EXISTS (SELECT 1 FROM execution_runs r WHERE r.delivery_id = ?3)`,
		holder, s.d.ts(at.Add(ttl)), id, store.DeliveryReceived, s.d.ts(at)), []any{&runs}})
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return d, runs, nil
}

// trailing scans, after the columns a scan function asks for, the extra
// columns a statement returns beyond them.
type trailing struct {
	r     scanner
	extra []any
}

// Scan implements scanner: dest, then the extra columns.
func (t trailing) Scan(dest ...any) error { return t.r.Scan(append(dest, t.extra...)...) }

// ReleaseDeliveryClaim clears holder's claim on a delivery.
func (s *Store) ReleaseDeliveryClaim(ctx context.Context, id, holder string) error {
	_, err := s.exec(ctx, `UPDATE deliveries SET claimed_by = NULL, claim_expires_at = NULL WHERE id = ? AND claimed_by = ?`, id, holder)
	return mapErr(err)
}
