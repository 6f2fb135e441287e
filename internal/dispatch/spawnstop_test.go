package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// stoppingSpawner is a spawner that also records Stop calls.
type stoppingSpawner struct {
	spawner
	smu     sync.Mutex
	stopped []string
}

func (s *stoppingSpawner) Stop(agentID string) {
	s.smu.Lock()
	s.stopped = append(s.stopped, agentID)
	s.smu.Unlock()
}

func (s *stoppingSpawner) stoppedIDs() []string {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append([]string(nil), s.stopped...)
}

// TestCancellingJobStopsItsUnregisteredAgent: a job cancelled (or expired)
// while the agent spawned for it has not registered yet stops that agent
// at once instead of leaving it to hold a pool slot until its spawn
// deadline; an agent spawned for another job is left alone.
func TestCancellingJobStopsItsUnregisteredAgent(t *testing.T) {
	sp := &stoppingSpawner{spawner: spawner{labels: []string{"linux"}}}
	h := newHarness(t, Config{}, sp)
	ctx := context.Background()
	cancelled, expired, other := h.job("linux"), h.job("linux"), h.job("linux")
	h.enqueue(cancelled)
	h.enqueue(expired)
	h.enqueue(other)
	wait.For(t, 5*time.Second, "three spawns", func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return len(sp.ids) == 3
	})
	sp.mu.Lock()
	agentOf := map[string]string{}
	for i, jobID := range sp.calls {
		agentOf[jobID] = sp.ids[i]
	}
	sp.mu.Unlock()

	h.d.AbortJob(ctx, cancelled.ID, "run cancelled")
	if got := sp.stoppedIDs(); !slices.Equal(got, []string{agentOf[cancelled.ID]}) {
		t.Fatalf("after the cancel, stopped %v, want only %s", got, agentOf[cancelled.ID])
	}
	if _, err := h.d.ExpireQueued(ctx, expired.ID); err != nil {
		t.Fatal(err)
	}
	got := sp.stoppedIDs()
	if len(got) != 2 || got[1] != agentOf[expired.ID] || slices.Contains(got, agentOf[other.ID]) {
		t.Fatalf("after the expiry, stopped %v; want %s too and never %s", got, agentOf[expired.ID], agentOf[other.ID])
	}
}
