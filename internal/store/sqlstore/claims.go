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

// TakeDelivery claims like ClaimDelivery and returns the claimed row;
// nil, nil when the claim was not given.
func (s *Store) TakeDelivery(ctx context.Context, id, holder string, ttl time.Duration) (*store.Delivery, error) {
	at := now()
	d, err := scanDelivery(s.queryRow(ctx, `UPDATE deliveries SET claimed_by = ?1, claim_expires_at = ?2
		WHERE id = ?3 AND status = ?4 AND (claimed_by IS NULL OR claimed_by = ?1 OR claim_expires_at <= ?5)
		RETURNING `+deliveryCols,
		holder, s.d.ts(at.Add(ttl)), id, store.DeliveryReceived, s.d.ts(at)))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return d, err
}

// ReleaseDeliveryClaim clears holder's claim on a delivery.
func (s *Store) ReleaseDeliveryClaim(ctx context.Context, id, holder string) error {
	_, err := s.exec(ctx, `UPDATE deliveries SET claimed_by = NULL, claim_expires_at = NULL WHERE id = ? AND claimed_by = ?`, id, holder)
	return mapErr(err)
}
