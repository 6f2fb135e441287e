package ingest

import (
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/testutil/wait"
)

// Deliveries are processed by several workers, yet the runs of one source
// and ref are created in delivery order.
func TestPoolKeepsDeliveryOrderPerRef(t *testing.T) {
	h := newHarness(t)
	h.proc.Workers = 4
	h.repo.Write(lockfile.Path, testLock)
	prev := h.repo.Commit("initial")
	var ids []string
	ref := map[string]string{}
	for i := 0; i < 24; i++ {
		h.repo.Write("src/f.go", "package main // "+string(rune('a'+i))+"\n")
		c := h.repo.Commit("c")
		r := "refs/heads/main"
		if i%2 == 1 {
			r = "refs/heads/release/1"
		}
		id := h.deliver(r, prev, c)
		ids = append(ids, id)
		ref[id] = r
		prev = c
	}
	h.proc.Start(h.ctx)
	defer h.proc.Stop()
	for _, id := range ids {
		h.proc.Submit(id)
	}
	// The enqueue order of each run's first job is its creation order; wait
	// until every run has enqueued one.
	distinct := func() []string {
		h.enq.mu.Lock()
		defer h.enq.mu.Unlock()
		var out []string
		seen := map[string]bool{}
		for _, rid := range h.enq.runs {
			if !seen[rid] {
				seen[rid] = true
				out = append(out, rid)
			}
		}
		return out
	}
	if !wait.Until(20*time.Second, func() bool { return len(distinct()) >= len(ids) }) {
		t.Fatalf("%d runs enqueued, want %d", len(distinct()), len(ids))
	}
	runs := distinct()
	var order []string
	for _, rid := range runs {
		r, err := h.st.GetRun(h.ctx, rid)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, r.DeliveryID)
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	last := map[string]int{}
	for i, id := range ids {
		p, ok := pos[id]
		if !ok {
			t.Fatalf("delivery %d has no run", i)
		}
		if q, ok := last[ref[id]]; ok && p < q {
			t.Fatalf("delivery %d on %s got its run before the previous delivery of that ref", i, ref[id])
		}
		last[ref[id]] = p
	}
}
