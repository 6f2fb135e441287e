package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// reasonBatches records SetPendingReasons calls; the first blocks until
// hold is closed.
type reasonBatches struct {
	store.Store
	mu      sync.Mutex
	batches []map[string]string
	hold    chan struct{}
}

func (r *reasonBatches) SetPendingReasons(_ context.Context, m map[string]string) error {
	r.mu.Lock()
	r.batches = append(r.batches, maps.Clone(m))
	first := len(r.batches) == 1
	r.mu.Unlock()
	if first {
		<-r.hold
	}
	return nil
}

func (r *reasonBatches) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

// Reasons put while a write is in flight go out together in the next
// write, and per job the last reason put is the one written (a clear
// after a reason stays a clear).
func TestReasonWriterBatchesAndKeepsTheLastReason(t *testing.T) {
	rec := &reasonBatches{hold: make(chan struct{})}
	w := newReasonWriter(rec, slog.New(slog.DiscardHandler))
	w.put("j0", "no agent online")
	wait.For(t, 5*time.Second, "the first write to start", func() bool { return rec.count() == 1 })
	for i := range 1000 {
		w.put(fmt.Sprintf("j%d", i), "all matching agents busy")
	}
	w.put("j5", "spawning agent a-5")
	w.put("j5", "")
	w.put("j0", "draining")
	close(rec.hold)
	w.wait()
	if len(rec.batches) != 2 {
		t.Fatalf("%d writes for 1,003 reasons put behind one in flight, want 2", len(rec.batches))
	}
	second := rec.batches[1]
	if len(second) != 1000 || second["j5"] != "" || second["j0"] != "draining" || second["j999"] != "all matching agents busy" {
		t.Fatalf("second write: %d jobs, j5=%q j0=%q j999=%q", len(second), second["j5"], second["j0"], second["j999"])
	}
	w.put("j1", "no agent online")
	w.wait()
	if len(rec.batches) != 3 || len(rec.batches[2]) != 1 {
		t.Fatalf("a reason put after the writer went idle: writes %v", rec.batches[2:])
	}
}
