package ingest

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

// maxHandedBytes bounds the payload bytes of accepted deliveries kept in
// memory while they wait for a worker. Beyond it a delivery waits as its
// id alone and its processing takes it from the store (still this node's
// claim, so nothing is lost, only the round trip is paid).
const maxHandedBytes = 64 << 20

// handed is a delivery the webhook ingress of this node stored already
// claimed by this processor, with the source it was accepted for. Its
// processing takes neither the claim nor the source from the store.
type handed struct {
	d   *store.Delivery
	src *store.Source
	set *store.SourceSettings
	// claimedAt is when the claim written with the delivery began.
	claimedAt time.Time
}

// ClaimOnAccept sets d's claim to this processor for the insert that
// stores it (webhook.Accepter): no other node takes the delivery while
// this one has it queued, and this one need not claim it again. A
// processor not running (not started, or stopping) claims nothing: the
// delivery is left to whichever node re-scans first.
func (p *Processor) ClaimOnAccept(d *store.Delivery) {
	if p.running.Load() {
		d.ClaimedBy, d.ClaimExpiresAt = p.holder(), time.Now().Add(p.claimTTL())
	}
}

// SubmitAccepted is SubmitDelivery for a delivery the webhook ingress has
// just stored under ClaimOnAccept's claim, accepted for src with its
// settings set (webhook.Accepter). The row is kept for processing as the
// store holds it (its times at the store's millisecond precision).
func (p *Processor) SubmitAccepted(d *store.Delivery, src *store.Source, set *store.SourceSettings) {
	if d.Status != store.DeliveryReceived {
		return
	}
	if d.ClaimedBy != p.holder() {
		p.SubmitDelivery(d)
		return
	}
	if !p.running.Load() {
		// Claimed as the processor stopped: nothing will take it from
		// the queue, so the claim is given up for another node.
		go p.releaseClaims([]string{d.ID})
		return
	}
	row := *d
	row.ReceivedAt = d.ReceivedAt.UTC().Truncate(time.Millisecond)
	row.ClaimedBy, row.ClaimExpiresAt = "", time.Time{}
	h := &handed{d: &row, src: src, set: set, claimedAt: d.ClaimExpiresAt.Add(-p.claimTTL())}
	p.submit(submitted{id: d.ID, key: orderKey(d), h: h})
}

// take claims delivery id for processing and returns its row and whether
// runs naming it are stored already. A delivery handed over by the ingress
// is used as handed while its accept-time claim is young (within the first
// third of its lease, when keepClaim would first renew it): nothing can
// have taken it over since. An older one is taken from the store like any
// other, which renews the claim or finds it lost.
func (p *Processor) take(ctx context.Context, id string, h *handed) (*store.Delivery, bool, error) {
	if h != nil && time.Since(h.claimedAt) < p.claimTTL()/3 {
		return h.d, false, nil
	}
	return p.st.TakeDelivery(ctx, id, p.holder(), p.claimTTL())
}

// source returns the delivery's source and its settings when the ingress
// handed them over (nil, nil, false otherwise).
func (h *handed) source() (*store.Source, *store.SourceSettings, bool) {
	if h == nil || h.src == nil {
		return nil, nil, false
	}
	return h.src, h.set, true
}

// payloadBytes is what keeping h in memory costs, for maxHandedBytes.
func (h *handed) payloadBytes() int {
	if h == nil {
		return 0
	}
	return len(h.d.Payload)
}

// releaseTimeout bounds the release of the claims of deliveries still
// queued when the processor stops; those not released by then run out
// with their lease (claimTTL).
const releaseTimeout = 5 * time.Second

// releaseQueued gives up this node's claim on every delivery still queued
// or submitted when the processor stops (the accept-time claims of
// ClaimOnAccept), so that another node takes them at its next re-scan
// rather than when their lease runs out. A delivery this node does not
// hold is left as it is (store.ReleaseDeliveryClaim).
func (p *Processor) releaseQueued(s *scheduler) {
	p.running.Store(false)
	var ids []string
	for _, w := range s.ready {
		ids = append(ids, w.id)
	}
	for _, ws := range s.waiting {
		for _, w := range ws {
			ids = append(ids, w.id)
		}
	}
drain:
	for {
		select {
		case sub := <-p.ch:
			ids = append(ids, sub.id)
		default:
			break drain
		}
	}
	p.releaseClaims(ids)
}

// releaseClaims gives up this node's claims on deliveries ids, within
// releaseTimeout; a failure is logged (the claims then run out).
func (p *Processor) releaseClaims(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	holder := p.holder()
	for _, id := range ids {
		if err := p.st.ReleaseDeliveryClaim(ctx, id, holder); err != nil {
			p.log.Warn("ingest: release the claim of a queued delivery at stop; another node takes it when the lease runs out",
				"deliveryId", id, "error", err)
			return
		}
	}
}
