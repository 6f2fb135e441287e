package webhook

import (
	"context"
	"errors"
	"strconv"
	"time"

	"kici.dev/kici/internal/store"
)

// DefaultWebhookDedupTTL is how long a delivery id is remembered for
// deduplication when no live value is configured (KiCI
// webhook_dedup_ttl_ms / KICI_WEBHOOK_DEDUP_TTL_MS default, 24 h).
const DefaultWebhookDedupTTL = 24 * time.Hour

// maxGenerations bounds the generation search of one delivery id.
const maxGenerations = 1 << 20

// dedupTTL is the dedup window in force now.
func (in *Ingress) dedupTTL(ctx context.Context) time.Duration {
	if f := in.opts.DedupTTL; f != nil {
		if v := f(ctx); v > 0 {
			return v
		}
	}
	return DefaultWebhookDedupTTL
}

// GenerationID is the id under which a delivery id base is stored the n-th
// time it is accepted (n ≥ 1): base itself for the first acceptance, then
// "<base>@<n>" for each replay that arrives after the dedup window of the
// previous acceptance has passed.
func GenerationID(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + "@" + strconv.Itoa(n)
}

// acceptWindowed persists d (whose ID is the base delivery id) with its
// event-log entry, applying the dedup window. When d.ID is new it is
// stored as is. Otherwise the newest generation of the id is found: if it
// was accepted within the window (now − ReceivedAt ≤ TTL) the result is
// store.ErrConflict with d.ID set to that generation (a duplicate);
// else d is stored as the next generation (GenerationID) and d.ID names it.
// Generation ids are deterministic, so concurrent replays race on one
// unique id and exactly one of them is accepted; the others see that fresh
// generation and are duplicates. Any other store error is returned (the
// request answers 500 and the sender retries; nothing half-written).
func (in *Ingress) acceptWindowed(ctx context.Context, d *store.Delivery, e *store.EventLogEntry) error {
	base, entry := d.ID, *e
	err := in.st.AcceptDelivery(ctx, d, e)
	if !errors.Is(err, store.ErrConflict) {
		return err
	}
	ttl := in.dedupTTL(ctx)
	for attempt := 0; attempt < 3; attempt++ {
		n, latest, err := in.latestGeneration(ctx, base)
		if err != nil {
			return err
		}
		d.ID = GenerationID(base, n)
		if in.opts.Now().Sub(latest.ReceivedAt) <= ttl || n >= maxGenerations {
			return store.ErrConflict
		}
		d.ID, d.Status = GenerationID(base, n+1), ""
		*e = entry
		err = in.st.AcceptDelivery(ctx, d, e)
		if !errors.Is(err, store.ErrConflict) {
			if err == nil {
				in.log.Info("webhook: delivery id seen again after its dedup window; accepted as a new delivery",
					"deliveryId", d.ID, "previous", GenerationID(base, n), "ttl", ttl)
			}
			return err
		}
		// Another request accepted generation n+1 first: look again.
	}
	return store.ErrConflict
}

// latestGeneration returns the newest stored generation of base and its
// delivery. Generations are contiguous (n+1 is only written after n was
// read), so an exponential then binary search finds the newest in
// O(log n) reads.
func (in *Ingress) latestGeneration(ctx context.Context, base string) (int, *store.Delivery, error) {
	get := func(n int) (*store.Delivery, error) {
		d, err := in.st.GetDelivery(ctx, GenerationID(base, n))
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return d, err
	}
	lo, best, err := 1, (*store.Delivery)(nil), error(nil)
	if best, err = get(1); err != nil {
		return 0, nil, err
	} else if best == nil {
		return 0, nil, errors.New("delivery " + base + " conflicts but cannot be read")
	}
	hi := 2
	for hi <= maxGenerations {
		d, err := get(hi)
		if err != nil {
			return 0, nil, err
		}
		if d == nil {
			break
		}
		lo, best, hi = hi, d, hi*2
	}
	// lo exists, hi does not (or is past the bound): binary search between.
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		d, err := get(mid)
		if err != nil {
			return 0, nil, err
		}
		if d != nil {
			lo, best = mid, d
		} else {
			hi = mid
		}
	}
	return lo, best, nil
}
