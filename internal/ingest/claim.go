package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// DefaultClaimTTL is the lease of a node's claim on the delivery it
// processes (store.DeliveryClaimStore). The claim is renewed every third
// of it while processing lasts, so it only runs out when its node died or
// stalled: then another node takes the delivery within this time (a node
// restarted with the same id takes its own claims back at once).
const DefaultClaimTTL = 30 * time.Second

// holder returns the id this processor claims deliveries under.
func (p *Processor) holder() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodeID == "" {
		p.nodeID = "pipeline-" + uuid.NewString()
	}
	return p.nodeID
}

func (p *Processor) claimTTL() time.Duration {
	if p.ClaimTTL > 0 {
		return p.ClaimTTL
	}
	return DefaultClaimTTL
}

// claimInStore takes the delivery's claim in the store; false when
// another node holds it or the delivery is no longer "received".
func (p *Processor) claimInStore(ctx context.Context, id string) (bool, error) {
	return p.st.ClaimDelivery(ctx, id, p.holder(), p.claimTTL())
}

// keepClaim renews the claim on id every third of its TTL until the
// returned stop is called. If the claim is lost (this node stalled past
// its lease and another node took the delivery), lost is called once:
// the caller stops creating runs the other node now creates.
func (p *Processor) keepClaim(ctx context.Context, id string, lost func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.claimTTL() / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			held, err := p.claimInStore(ctx, id)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					p.log.Warn("ingest: renew delivery claim", "deliveryId", id, "error", err)
				}
			case !held:
				p.log.Error("ingest: delivery claim lost to another node; stopping its processing", "deliveryId", id)
				lost()
				return
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
