package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// TestAgentDrainFinishesJobRefusesNewWorkAndExits proves the drain
// contract on the agent side: once draining (SIGUSR1), a dispatch is rejected "draining",
// the running job finishes normally (not cancelled), and the agent exits.
func TestAgentDrainFinishesJobRefusesNewWorkAndExits(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	gate := filepath.Join(t.TempDir(), "go")
	job := lockfile.Job{Name: "slow", Checkout: ptr(false), Steps: []lockfile.Step{
		{Name: "wait", Run: "while [ ! -f " + gate + " ]; do sleep 0.05; done; echo done"},
	}}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "j1"}, job)
	h.srv.WaitMessage(t, 10*time.Second, "step running", func(r agenttest.Received) bool {
		ss, ok := r.Msg.(*protocol.StepStatus)
		return ok && ss.State == status.StepRunning
	})
	h.agent.Drain()
	h.srv.WaitMessage(t, 10*time.Second, "agent.status draining", func(r agenttest.Received) bool {
		as, ok := r.Msg.(*protocol.AgentStatus)
		return ok && as.Draining
	})
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "j2"}, job)
	rej := h.srv.WaitMessage(t, 10*time.Second, "job.reject", func(r agenttest.Received) bool {
		_, ok := r.Msg.(*protocol.JobReject)
		return ok
	}).Msg.(*protocol.JobReject)
	if rej.JobID != "j2" || rej.Reason != protocol.RejectDraining {
		t.Errorf("reject = %+v, want j2 draining", rej)
	}
	select {
	case err := <-h.done:
		t.Fatalf("agent exited with a job still running: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	writeGate(t, gate)
	js, _ := h.srv.WaitJobTerminal(t, "j1", 20*time.Second)
	if js.State != status.JobSuccess {
		t.Errorf("drained job ended %s, want success", js.State)
	}
	if err := h.wait(t, 20*time.Second); err != nil {
		t.Errorf("Run after drain: %v", err)
	}
}

// TestAgentDrainWhenIdleExits: an idle agent exits at once on drain.
func TestAgentDrainWhenIdleExits(t *testing.T) {
	h := startAgent(t, agenttest.Options{}, nil)
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	h.agent.Drain()
	if err := h.wait(t, 20*time.Second); err != nil {
		t.Errorf("Run after drain: %v", err)
	}
}

func writeGate(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
