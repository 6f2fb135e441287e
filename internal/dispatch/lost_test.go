package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/wait"
)

// TestEndLostAgentsFailsTheirJobsAtOnce: after a restart, jobs of agents the
// scaler reports gone fail at once with the reason; a job of another agent
// is left for its agent to reclaim.
func TestEndLostAgentsFailsTheirJobsAtOnce(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Hour}, nil)
	_, _, lostJob := runningOnStatic(t, h) // agent a1
	other := h.agent("a2", h.staticToken(), "linux")
	j2 := h.job("linux")
	h.enqueue(j2)
	jd2 := other.dispatch()
	other.status(jd2, status.JobRunning)
	wait.For(t, 5*time.Second, "second job running", func() bool { return h.getJob(j2.ID).Status == status.JobRunning })

	// The restarted orchestrator: a new dispatcher over the same store.
	h2 := h.restarted(Config{}, Deps{})
	d2, ev2 := h2.d, h2.ev
	d2.EndLostAgents(context.Background(), []string{"a1", "never-seen"})
	if got := ev2.finishedOf(lostJob.JobID); len(got) != 1 || got[0] != status.JobFailed {
		t.Fatalf("lost agent's job: statuses %v, want failed", got)
	}
	ev2.mu.Lock()
	msg := ev2.errs[lostJob.JobID]
	ev2.mu.Unlock()
	if !strings.Contains(msg, "a1 ended while the orchestrator was down") {
		t.Errorf("error %q", msg)
	}
	if got := ev2.finishedOf(j2.ID); len(got) != 0 {
		t.Errorf("the other agent's job was ended too: %v", got)
	}
}
