package dispatch

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// TestOrchestratorDrainHoldsQueuedJobsUntilResume: while draining, an idle
// matching agent gets nothing, the spawner is not asked, and the job shows
// the pending reason "draining"; resume dispatches it.
func TestOrchestratorDrainHoldsQueuedJobsUntilResume(t *testing.T) {
	sp := &spawner{labels: []string{"linux"}}
	h := newHarness(t, Config{RedriveInterval: 50 * time.Millisecond}, sp)
	a := h.agent("a1", h.staticToken(), "linux")
	h.d.SetDraining(true)
	j := h.job("linux")
	h.enqueue(j)
	if r := h.getJob(j.ID).PendingReason; r != "draining" {
		t.Fatalf("pending reason while draining = %q", r)
	}
	wait.Elapse(t.Context(), 200*time.Millisecond) // several re-drives, none of which may dispatch
	if e := h.entry(j.ID); e.Status != store.QueuePending {
		t.Fatalf("entry %s while draining", e.Status)
	}
	sp.mu.Lock()
	calls := len(sp.calls)
	sp.mu.Unlock()
	if calls != 0 {
		t.Errorf("spawner asked %d times while draining", calls)
	}
	if !h.d.Draining() || h.d.JobsRunning() != 0 {
		t.Errorf("draining=%v jobsRunning=%d", h.d.Draining(), h.d.JobsRunning())
	}
	h.d.SetDraining(false)
	jd := a.dispatch()
	if jd.JobID != j.ID {
		t.Fatalf("dispatched %s, want %s", jd.JobID, j.ID)
	}
	if h.d.JobsRunning() != 1 {
		t.Errorf("jobsRunning = %d, want 1", h.d.JobsRunning())
	}
}

// TestDrainingAgentIsHandedNothing proves that once an agent has
// announced it is draining, no job is assigned to it.
func TestDrainingAgentIsHandedNothing(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("a1", h.staticToken(), "linux")
	a.send(&protocol.AgentStatus{Type: protocol.TypeAgentStatus, AgentID: "a1", Draining: true})
	wait.For(t, 5*time.Second, "draining noted", func() bool {
		h.d.reg.mu.Lock()
		defer h.d.reg.mu.Unlock()
		return h.d.reg.agents["a1"] != nil && h.d.reg.agents["a1"].closing
	})
	j := h.job("linux")
	h.enqueue(j)
	if e := h.entry(j.ID); e.Status != store.QueuePending {
		t.Fatalf("job handed to a draining agent: entry %s", e.Status)
	}
	if r := h.getJob(j.ID).PendingReason; r != "all matching agents busy" {
		t.Errorf("pending reason %q", r)
	}
}

// TestCancelJobReachesOwnerAndAbortFreesSlot: CancelJob sends job.cancel
// with the force flag to the owning agent; AbortJob fails the entry, frees
// the slot, and the agent's late terminal status finishes nothing twice.
func TestCancelJobReachesOwnerAndAbortFreesSlot(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	a := h.agent("a1", h.staticToken(), "linux")
	j := h.job("linux")
	h.enqueue(j)
	jd := a.dispatch()
	a.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job started", func() bool { return h.getJob(j.ID).Status == status.JobRunning })
	if h.d.CancelJob("unknown-job", "x", false) {
		t.Error("CancelJob of an untracked job reported sent")
	}
	if !h.d.CancelJob(j.ID, "cancelled by alice", true) {
		t.Fatal("CancelJob did not reach the agent")
	}
	c, ok := a.read().(*protocol.JobCancel)
	if !ok || c.JobID != j.ID || c.Reason != "cancelled by alice" || !c.Force {
		t.Fatalf("agent got %+v", c)
	}
	if !h.d.AbortJob(context.Background(), j.ID, "job_timeout: x") {
		t.Fatal("AbortJob did not change the entry")
	}
	if e := h.entry(j.ID); e.Status != store.QueueFailed {
		t.Errorf("entry after abort = %s", e.Status)
	}
	if h.d.JobsRunning() != 0 {
		t.Errorf("jobsRunning after abort = %d", h.d.JobsRunning())
	}
	// The agent's own report arrives later: accepted, changes nothing.
	a.status(jd, status.JobCancelled)
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a finish that must not come
	if got := h.ev.finishedOf(j.ID); len(got) != 0 {
		t.Errorf("late terminal status finished the job again: %v", got)
	}
	// The freed slot takes the next job.
	j2 := h.job("linux")
	h.enqueue(j2)
	for {
		m := a.read()
		if d, ok := m.(*protocol.JobDispatch); ok {
			if d.JobID != j2.ID {
				t.Fatalf("dispatched %s", d.JobID)
			}
			break
		}
	}
}
