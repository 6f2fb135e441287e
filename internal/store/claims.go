package store

import (
	"context"
	"time"
)

// DeliveryClaimStore makes a delivery processed by one node at a time:
// every node re-scans the deliveries still "received" (the crash-recovery
// path), and the claim, a lease on the delivery row, decides which node
// processes each one. A claim whose lease ran out (its node died or
// stalled) can be taken by any node; finishing a delivery
// (FinishDelivery, FinishDeliveryOutcome) clears its claim.
type DeliveryClaimStore interface {
	// ClaimDelivery gives holder (a node id) the delivery for ttl from
	// now, in one conditional write. It reports true when the delivery is
	// still "received" and unclaimed, claimed by holder already (a renewal,
	// or the same node restarted), or claimed under an expired lease;
	// false, changing nothing, when another holder's lease is live or the
	// delivery is finished or unknown.
	ClaimDelivery(ctx context.Context, id, holder string, ttl time.Duration) (bool, error)
	// TakeDelivery claims like ClaimDelivery and returns the claimed
	// delivery as the same write left it (UPDATE … RETURNING: one round
	// trip where a claim and a read took two), and whether runs naming
	// the delivery are stored already (an earlier processing stored them
	// without finishing it), so the first processing of a delivery, which
	// can have none, need not look them up; nil, false, with no error,
	// when the claim was not given.
	TakeDelivery(ctx context.Context, id, holder string, ttl time.Duration) (d *Delivery, runsStored bool, err error)
	// ReleaseDeliveryClaim drops holder's claim on a delivery it did not
	// finish, so another node may take it at once. A claim held by someone
	// else, or none, is left as it is.
	ReleaseDeliveryClaim(ctx context.Context, id, holder string) error
}
