package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/testutil/wait"
)

// runningThenRestarted runs a job on a static agent under a dispatcher
// whose sessions live in the store, stops that dispatcher (the agent's
// socket goes with it) and starts its successor over the same database.
func runningThenRestarted(t *testing.T) (h2 *harness, tok string, a *client, jd *protocol.JobDispatch) {
	t.Helper()
	ss := &StoreSessions{}
	h := newHarnessWith(t, Config{RecoveryWindow: time.Minute}, nil, Deps{Sessions: ss})
	ss.st = h.st // the harness opens the store; nothing registered yet
	tok, a, jd = runningOnStatic(t, h)
	a.ws.CloseNow() // the connection breaks as the orchestrator goes down
	wait.For(t, 5*time.Second, "the agent's socket gone", func() bool { return len(h.d.Agents()) == 0 })
	h.d.Shutdown(context.Background())
	return h.restarted(Config{RecoveryWindow: time.Minute}, Deps{Sessions: NewStoreSessions(h.st)}), tok, a, jd
}

// The attack of the single-node restart gap: an agent runs a job, the
// orchestrator restarts, and before the agent is back another holder of
// the same static token registers its id first, claiming the job in
// flight. The restarted orchestrator knows from the store that the id's
// session is another one: the impostor's session reclaims nothing and its
// status for the job is dropped (the job stays with the old session, to
// fail as lost if its agent does not come back within the recovery
// window).
func TestRestartImpostorWithoutResumeTokenReclaimsNothing(t *testing.T) {
	h2, tok, _, jd := runningThenRestarted(t)
	impostor := h2.reconnect(tok, "a1", "", protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	impostor.status(jd, status.JobFailed)
	impostor.ws.CloseNow()
	// Its frames are handled before its disconnect.
	wait.For(t, 5*time.Second, "the impostor's socket handled and gone", func() bool { return len(h2.d.Agents()) == 0 })
	if got := h2.ev.finishedOf(jd.JobID); len(got) != 0 || h2.startedCount(jd.JobID) != 0 {
		t.Fatalf("the impostor's session took the job: finished %v, started %d", got, h2.startedCount(jd.JobID))
	}
	if j := h2.getJob(jd.JobID); j.Status.IsTerminal() {
		t.Fatalf("job %s, want it still owned by its agent's session", j.Status)
	}
}

// The session survives the restart: the agent that comes back with its
// resume token keeps its session (same resume token), reclaims its job
// and finishes it; a registration of its id without the token is then
// refused while it is connected.
func TestRestartAgentWithResumeTokenReclaimsItsJob(t *testing.T) {
	h2, tok, a, jd := runningThenRestarted(t)
	real := h2.reconnect(tok, "a1", a.resume, protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	if real.resume != a.resume {
		t.Fatal("the resumed session got a new resume token")
	}
	// The job was adopted before register.ack went out.
	impostor := h2.dial()
	impostor.auth(tok)
	impostor.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: "m", AgentID: "a1", Labels: []string{"linux"}})
	if code, _ := impostor.closed(); code != protocol.CloseInvalidMessage {
		t.Fatalf("second registration without the resume token: close %d, want %d", code, protocol.CloseInvalidMessage)
	}
	real.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "the job finished", func() bool { return len(h2.ev.finishedOf(jd.JobID)) > 0 })
	if got := h2.ev.finishedOf(jd.JobID); !slices.Equal(got, []status.Job{status.JobSuccess}) {
		t.Fatalf("job finished %v, want the agent's success", got)
	}
}
