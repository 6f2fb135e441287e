package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// agentResuming registers agent id on a new socket presenting resume as
// its previous session's resume token.
func (h *harness) agentResuming(id, token, resume string) *client {
	h.t.Helper()
	c := h.dial()
	c.auth(token)
	c.resume = resume
	c.register(id)
	wait.For(h.t, 5*time.Second, "registration drain", func() bool { return h.d.queue.registering.Load() == 0 })
	return c
}

// TestSecondConnectionCannotTakeOverLiveAgent is the socket-takeover
// attack: a second holder of a live agent's (static) token registers the
// same agent id while the agent runs a job, to finish it with its own
// status. The orchestrator refuses the second socket, keeps the first, and
// the job ends with the real agent's status.
func TestSecondConnectionCannotTakeOverLiveAgent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	tok := h.staticToken()
	real := h.agent("host-1", tok)
	j := h.job()
	h.enqueue(j)
	jd := real.dispatch()
	real.status(jd, status.JobRunning)
	wait.For(t, 5*time.Second, "job running", func() bool { return h.getJob(j.ID).Status == status.JobRunning })

	for _, resume := range []string{"", "krs_guessed", real.resume + "0"} {
		imp := h.dial()
		imp.auth(tok)
		imp.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: "host-1",
			ResumeToken: resume, InFlightJobs: []protocol.InFlightJob{{JobID: j.ID, RunID: j.RunID}}})
		code, msgs := imp.closed()
		if code != protocol.CloseInvalidMessage {
			t.Fatalf("impostor (resume %q): close %d, want 4003", resume, code)
		}
		for _, m := range msgs {
			if _, isAck := m.(*protocol.RegisterAck); isAck {
				t.Fatalf("impostor (resume %q) got register.ack", resume)
			}
		}
	}
	// The real agent's socket is untouched and still owns the job.
	if a := h.d.Agents(); len(a) != 1 || len(a[0].JobIDs) != 1 || a[0].JobIDs[0] != j.ID {
		t.Fatalf("agents after the takeover attempts: %+v", a)
	}
	real.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "real agent's status stored", func() bool {
		got := h.ev.finishedOf(j.ID)
		return len(got) == 1 && got[0] == status.JobSuccess
	})
}

// TestNewSessionCannotReclaimDisconnectedAgentsJob: while a static agent is
// away (its job recovering), a registration of its id without the
// session's resume token is a new session: it reclaims nothing, the job
// fails as lost, and a status it sends for the job is not stored.
func TestNewSessionCannotReclaimDisconnectedAgentsJob(t *testing.T) {
	h := newHarness(t, Config{RecoveryWindow: time.Hour}, nil)
	tok, a, jd := runningOnStatic(t, h)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "job recovering", func() bool { return h.getJob(jd.JobID).Status == status.JobRecovering })
	imp := h.reconnect(tok, "a1", "", protocol.InFlightJob{JobID: jd.JobID, RunID: jd.RunID})
	wait.For(t, 5*time.Second, "job failed as lost", func() bool { return len(h.ev.finishedOf(jd.JobID)) == 1 })
	imp.status(jd, status.JobSuccess)
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a finish that must not come
	if got := h.ev.finishedOf(jd.JobID); len(got) != 1 || got[0] != status.JobFailed {
		t.Fatalf("job statuses %v, want only failed", got)
	}
	if imp.resume == "" || imp.resume == a.resume {
		t.Fatalf("new session got resume token %q (old %q)", imp.resume, a.resume)
	}
}

// TestEphemeralTokenDiesWithItsSession is the token-reuse attack: after a
// scaler-spawned agent's job ended and the agent went away, its token is
// refused (4010) — whatever labels or id it claims — so it cannot be
// handed other jobs or their secrets.
func TestEphemeralTokenDiesWithItsSession(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ctx := context.Background()
	const id = "scaler-local-0000beef"
	tok, err := h.aa.IssueEphemeralFor(ctx, id, []string{"linux"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Labels are fixed at mint: claiming another one is refused.
	c := h.dial()
	c.auth(tok)
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, AgentID: id, Labels: []string{"linux", "gpu"}})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("label outside the minted set: close %d, want 4010", code)
	}

	agent := h.agent(id, tok, "linux")
	j := h.job("linux")
	h.enqueue(j)
	jd := agent.dispatch()
	agent.status(jd, status.JobRunning)
	agent.status(jd, status.JobSuccess)
	wait.For(t, 5*time.Second, "job finished", func() bool { return len(h.ev.finishedOf(j.ID)) == 1 })
	agent.ws.CloseNow()
	wait.For(t, 5*time.Second, "agent gone", func() bool { return len(h.d.Agents()) == 0 })

	// Another job with a secret waits in the queue; the old token must not
	// reach it, not even with the old session's resume token.
	h.enqueue(h.job("linux"))
	for _, resume := range []string{"", agent.resume} {
		again := h.dial()
		again.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: tok, ProtocolVersion: protocol.Version})
		code, msgs := again.closed()
		if code != protocol.CloseAuthFailed {
			t.Fatalf("reuse (resume %q): close %d, want 4010", resume, code)
		}
		if len(msgs) != 1 {
			t.Fatalf("reuse: messages %+v", msgs)
		}
		if f, ok := msgs[0].(*protocol.AuthFailure); !ok || f.Reason == "" {
			t.Fatalf("reuse: want auth.failure, got %+v", msgs[0])
		}
	}
	toks, err := h.st.ListAgentTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		if tk.Kind == store.AgentTokenEphemeral && tk.BoundAgentID == id && tk.RevokedAt == nil {
			t.Fatal("ephemeral token still live after its session")
		}
	}
}

// TestEphemeralTokenDiesWhenAgentDisconnects: a scaler-spawned agent that
// drops its socket mid-job cannot come back with its token (the job fails
// as lost at once, KiCI's disconnect triage).
func TestEphemeralTokenDiesWhenAgentDisconnects(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	const id = "scaler-local-0000cafe"
	tok, err := h.aa.IssueEphemeralFor(context.Background(), id, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := h.agent(id, tok)
	a.ws.CloseNow()
	wait.For(t, 5*time.Second, "agent gone", func() bool { return len(h.d.Agents()) == 0 })
	c := h.dial()
	c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: tok, ProtocolVersion: protocol.Version})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("close %d, want 4010", code)
	}
}
