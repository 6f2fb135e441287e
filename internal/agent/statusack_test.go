package agent

import (
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// isTerminalStatusOn matches the terminal job.status of jobID received on
// connection conn.
func isTerminalStatusOn(conn int, jobID string) func(agenttest.Received) bool {
	return func(r agenttest.Received) bool {
		js, ok := r.Msg.(*protocol.JobStatus)
		return ok && r.Conn == conn && js.JobID == jobID && js.State.IsTerminal()
	}
}

// A single-use agent whose node dies after the job's terminal status was
// written but before it was acknowledged does not exit with the status
// unstored: it reconnects, sends the status again to the node it reaches,
// and exits once that node acknowledges it.
func TestSingleUseAgentExitsOnlyOnceItsStatusIsAcknowledged(t *testing.T) {
	h := startAgent(t, agenttest.Options{StatusAcks: true}, func(c *Config) {
		c.ScalerManaged = true
		c.ScalerIdleTimeout = 10 * time.Second
	})
	h.srv.WaitRegistrations(t, 1, 10*time.Second)
	if !h.srv.Registrations()[0].StatusAcks {
		t.Fatal("agent.register does not offer statusAcks")
	}
	h.srv.Dispatch(t, &protocol.JobDispatch{RunID: "r", JobID: "one"}, lockfile.Job{Name: "j", Checkout: ptr(false), Steps: []lockfile.Step{{Name: "s", Run: "exit 3"}}})
	h.srv.WaitMessage(t, 20*time.Second, "the terminal status on the first connection", isTerminalStatusOn(1, "one"))

	h.srv.Drop() // the node dies without acknowledging
	h.srv.WaitRegistrations(t, 2, 10*time.Second)
	r := h.srv.WaitMessage(t, 10*time.Second, "the terminal status sent again after the reconnect", isTerminalStatusOn(2, "one"))
	if js := r.Msg.(*protocol.JobStatus); js.State != status.JobFailed {
		t.Fatalf("replayed status %s, want failed", js.State)
	}
	select {
	case err := <-h.done:
		t.Fatalf("agent exited (%v) before its status was acknowledged", err)
	default:
	}
	if err := h.srv.Send(&protocol.JobStatusAck{Type: protocol.TypeJobStatusAck, RunID: "r", JobID: "one", State: status.JobFailed}); err != nil {
		t.Fatal(err)
	}
	if err := h.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}
