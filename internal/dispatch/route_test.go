package dispatch

import (
	"fmt"
	"testing"

	"kici.dev/kici/internal/store"
)

// A re-drive makes one failing routing decision per label set, not one per
// parked job: with many jobs parked at scaler capacity, the spawner is asked
// once for the oldest of them, and the parked jobs keep their honest reason.
// When capacity comes back the oldest parked job is the one spawned for.
func TestRedriveAsksOncePerLabelSet(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}, err: fmt.Errorf("%w (1/1 agents)", ErrAtCapacity)}
	h := newHarness(t, Config{}, sp)
	var parked []string
	for i := 0; i < 50; i++ {
		j := h.job("kici:os:linux")
		h.enqueue(j)
		parked = append(parked, j.ID)
	}
	other := h.job("kici:os:linux", "gpu") // another label set, nobody serves it
	h.enqueue(other)
	sp.mu.Lock()
	before := len(sp.calls)
	sp.mu.Unlock()
	if before != 50 {
		t.Fatalf("enqueue consulted the spawner %d times, want 50 (once per job)", before)
	}

	h.d.queue.redrive()
	sp.mu.Lock()
	calls := append([]string(nil), sp.calls[before:]...)
	sp.mu.Unlock()
	if len(calls) != 1 || calls[0] != parked[0] {
		t.Fatalf("re-drive asked the spawner for %v, want only the oldest parked job %s", calls, parked[0])
	}
	for _, id := range parked {
		if r := h.getJob(id).PendingReason; r != "scaler at capacity (1/1 agents)" {
			t.Fatalf("parked job %s reason %q", id, r)
		}
	}
	if r := h.getJob(other.ID).PendingReason; r != "unroutable: no agent online; no scaler label set serves runsOn [gpu kici:os:linux]" {
		t.Fatalf("other label set reason %q", r)
	}

	// Capacity is back: every parked job is spawned for, oldest first.
	sp.mu.Lock()
	sp.err = nil
	sp.mu.Unlock()
	h.d.queue.redrive()
	sp.mu.Lock()
	calls = append([]string(nil), sp.calls[before+1:]...)
	sp.mu.Unlock()
	if len(calls) != len(parked) || calls[0] != parked[0] || calls[len(calls)-1] != parked[len(parked)-1] {
		t.Fatalf("after capacity returned the spawner was asked %d times (first %v), want %d oldest first", len(calls), calls[:1], len(parked))
	}
	for _, id := range parked {
		if e := h.entry(id); e.PinnedAgentID == "" {
			t.Fatalf("parked job %s not pinned to a spawned agent", id)
		}
	}
}

// A job whose label set no agent serves does not keep a fitting job from an
// idle agent during a re-drive, however many of the former are parked.
func TestRedriveRoutesPastParkedLabelSets(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for i := 0; i < 30; i++ {
		h.enqueue(h.job("windows"))
	}
	fit := h.job("linux")
	h.enqueue(fit) // nobody online yet: waits
	a := h.agent("a1", h.staticToken(), "linux")
	if jd := a.dispatch(); jd.JobID != fit.ID {
		t.Fatalf("agent got %s, want %s", jd.JobID, fit.ID)
	}
}

// BenchmarkRouteMatch measures the routing decision's label work: the
// route key of an entry and the label match against one agent.
func BenchmarkRouteMatch(b *testing.B) {
	e := &store.QueueEntry{RunsOnLabels: []string{"kici:os:linux", "docker", "gpu"}, ExcludeLabels: []string{"slow"}}
	agent := []string{"kici:os:linux", "kici:arch:amd64", "kici:host:ci-1", "docker", "gpu", "big"}
	for b.Loop() {
		_ = routeKey(e)
		_ = labelsMatch(agent, e.RunsOnLabels, e.ExcludeLabels)
	}
}

// When the reason of a parked label set changes (an agent came online),
// one re-drive rewrites a bounded number of parked jobs' reasons; the rest
// follow on the next passes, so no pass stalls on thousands of writes.
func TestRedriveSpreadsReasonChanges(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	var parked []string
	for i := 0; i < maxReasonWrites+40; i++ {
		j := h.job("gpu")
		h.enqueue(j)
		parked = append(parked, j.ID)
	}
	_ = h.agent("a1", h.staticToken(), "linux") // now agents are online
	changed := func() int {
		n := 0
		for _, id := range parked {
			if h.getJob(id).PendingReason == "unroutable: no agent with labels [gpu]; no scaler label set serves runsOn [gpu]" {
				n++
			}
		}
		return n
	}
	h.d.queue.redrive()
	if n := changed(); n != maxReasonWrites+1 {
		t.Fatalf("after one pass %d reasons changed, want %d (the oldest and %d followers)", n, maxReasonWrites+1, maxReasonWrites)
	}
	h.d.queue.redrive()
	if n := changed(); n != len(parked) {
		t.Fatalf("after two passes %d of %d reasons changed", n, len(parked))
	}
}
