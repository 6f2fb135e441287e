package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// One job is asked of the spawner once, however many routing decisions
// race for it: a re-drive reads the oldest pending entry from the index
// (unpinned), the enqueue path routes the same job first and binds it to a
// spawned agent, then the re-drive's decision runs on its copy. The job
// must stay bound to the first agent, with no second agent spawned for it.
func TestRacingRoutesSpawnOneAgentPerJob(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}}
	h := newHarness(t, Config{}, sp)
	ctx := context.Background()
	j := h.job("kici:os:linux")
	e := &store.QueueEntry{ID: j.ID, RunID: j.RunID, JobName: j.JobName, RunsOnLabels: j.RunsOnLabels,
		Status: store.QueuePending, CreatedAt: time.Now().UTC()}
	if err := h.st.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	h.d.queue.pending.put(e)
	_, redriveCopy := h.d.queue.pending.oldestHead(nil) // the re-drive's read

	h.enqueue(j) // the enqueue path routes the job: one spawn, pinned
	h.d.queue.route(ctx, redriveCopy, "")

	sp.mu.Lock()
	calls, ids := slices.Clone(sp.calls), slices.Clone(sp.ids)
	sp.mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("the spawner was asked %d times for one job (%v), want once", len(calls), calls)
	}
	if got := h.entry(j.ID).PinnedAgentID; got != ids[0] {
		t.Fatalf("job pinned to %q, want the agent spawned for it %q", got, ids[0])
	}
	if r := h.getJob(j.ID).PendingReason; r != "spawning agent "+ids[0] {
		t.Fatalf("pending reason %q", r)
	}
}

// A job with a spawn outstanding is not spawned for again even when its
// pin did not reach the index (a store error while pinning): the spawn
// record is the authority for "an agent is on its way".
func TestOutstandingSpawnIsNotRequestedAgain(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}}
	h := newHarness(t, Config{}, sp)
	j := h.job("kici:os:linux")
	h.enqueue(j)
	h.d.queue.pending.pin(j.ID, "") // as if the pin had failed
	h.d.queue.redrive()
	sp.mu.Lock()
	n := len(sp.calls)
	sp.mu.Unlock()
	if n != 1 {
		t.Fatalf("the spawner was asked %d times for one job with a spawn outstanding, want once", n)
	}
}

// A spawned agent whose bound job was taken by another agent before it
// registered is not told a dispatch is pending: it then waits only the
// short idle timeout (KICI_SCALER_IDLE_TIMEOUT, 5 s) before exiting, not
// the 60 s KICI_SCALER_PENDING_DISPATCH_TIMEOUT.
func TestSpawnedAgentWhoseJobWasTakenIsNotToldADispatchIsPending(t *testing.T) {
	sp := &spawner{labels: []string{"kici:os:linux"}}
	h := newHarness(t, Config{}, sp)
	ctx := context.Background()
	static := h.agent("aaa-static", h.staticToken(), "kici:os:linux")
	j := h.job("kici:os:linux")
	h.enqueue(j)
	if jd := static.dispatch(); jd.JobID != j.ID {
		t.Fatalf("job not on the idle static agent")
	}
	const late = "kici-local-late0001"
	h.d.queue.mu.Lock()
	h.d.queue.spawns[late] = &spawnRec{jobID: j.ID, deadline: time.Now().Add(time.Minute)}
	h.d.queue.mu.Unlock()
	tok, err := h.aa.IssueEphemeral(ctx, late, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.auth(tok)
	ack := c.register(late, "kici:os:linux")
	if !ack.ScalerManaged || ack.PendingDispatch {
		t.Fatalf("register.ack %+v: want scalerManaged without pendingDispatch", ack)
	}
}
