package ingest

import (
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// nodeProcessor returns a second processor on h's store, as another
// orchestrator node would run it.
func (h *harness) nodeProcessor(nodeID string) *Processor {
	tr := runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{})
	return NewProcessor(h.st, tr, nil, ProcessorDeps{NodeID: nodeID})
}

// Two nodes racing on the same delivery, each several times at once,
// create its run once.
func TestTwoNodesProcessOneDeliveryOnce(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	nodes := []*Processor{h.nodeProcessor("node-a"), h.nodeProcessor("node-b")}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := nodes[i%2].Process(h.ctx, id); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if d, _ := h.delivery(id); d.Status != store.DeliveryProcessed {
		t.Fatalf("delivery status %q, want processed", d.Status)
	}
	if runs := h.runsOf(id); len(runs) != 1 {
		t.Fatalf("%d runs, want exactly 1", len(runs))
	}
}

// A delivery another node holds is left alone while its lease is live;
// once the lease ran out (that node died mid-processing) it is processed.
// The same node restarted takes its own claim back at once.
func TestClaimedDeliveryWaitsForLeaseExpiry(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", local.ZeroSHA, c1)
	// The claim outlasts node-b's first attempt even on a starved machine;
	// the wait.For below covers its expiry.
	if ok, err := h.st.ClaimDelivery(h.ctx, id, "node-gone", 3*time.Second); err != nil || !ok {
		t.Fatalf("claim by node-gone: %v %v", ok, err)
	}
	other := h.nodeProcessor("node-b")
	if err := other.Process(h.ctx, id); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.delivery(id); d.Status != store.DeliveryReceived || len(h.runsOf(id)) != 0 {
		t.Fatalf("delivery held by another node was processed: status %q, %d runs", d.Status, len(h.runsOf(id)))
	}
	wait.For(t, 15*time.Second, "node-b to process the delivery after node-gone's lease expired", func() bool {
		if err := other.Process(h.ctx, id); err != nil {
			t.Fatal(err)
		}
		d, _ := h.delivery(id)
		return d.Status == store.DeliveryProcessed
	})
	if runs := h.runsOf(id); len(runs) != 1 {
		t.Fatalf("%d runs, want exactly 1", len(runs))
	}

	id2 := h.deliver("refs/heads/main", c1, c1)
	if ok, err := h.st.ClaimDelivery(h.ctx, id2, "node-a", time.Hour); err != nil || !ok {
		t.Fatalf("claim by node-a: %v %v", ok, err)
	}
	if err := h.nodeProcessor("node-a").Process(h.ctx, id2); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.delivery(id2); d.Status != store.DeliveryProcessed {
		t.Fatalf("node-a restarted left its own claimed delivery %q", d.Status)
	}
}
