package dispatch

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// assertKicked waits for c's socket to close with 4010 after an
// auth.failure carrying reason.
func assertKicked(t *testing.T, c *client, reason string) {
	t.Helper()
	code, msgs := c.closed()
	if code != protocol.CloseAuthFailed {
		t.Fatalf("close code %d, want %d", code, protocol.CloseAuthFailed)
	}
	for _, m := range msgs {
		if f, ok := m.(*protocol.AuthFailure); ok && f.Reason == reason {
			return
		}
	}
	t.Fatalf("no auth.failure %q before the close: %+v", reason, msgs)
}

func TestRevokedTokenClosesLiveConnections(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ctx := context.Background()
	plain, tok, err := h.aa.IssueStatic(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := h.staticToken()
	a1 := h.agent("a1", plain, "linux")
	a2 := h.agent("a2", plain, "linux")
	keep := h.agent("keep", other, "linux")
	if err := h.st.RevokeAgentToken(ctx, tok.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := h.d.KickToken(tok.ID); n != 2 {
		t.Fatalf("kicked %d sockets, want 2", n)
	}
	assertKicked(t, a1, ReasonTokenRevoked)
	assertKicked(t, a2, ReasonTokenRevoked)
	wait.For(t, 5*time.Second, "revoked agents unregistered", func() bool { return len(h.d.Agents()) == 1 })
	if got := h.d.Agents()[0].ID; got != "keep" {
		t.Fatalf("remaining agent %s", got)
	}
	// The untouched agent still gets work.
	j := h.job("linux")
	h.enqueue(j)
	if jd := keep.dispatch(); jd.JobID != j.ID {
		t.Fatalf("dispatch to remaining agent: %+v", jd)
	}
	// Reconnecting with the revoked token fails at the handshake.
	c := h.dial()
	c.send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: plain, ProtocolVersion: protocol.Version})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("reconnect with revoked token: close %d", code)
	}
}

func TestExpiringStaticTokenClosesAtExpiry(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ctx := context.Background()
	plain := auth.NewAgentTokenPlaintext()
	// Far enough ahead that connecting, signing in and registering end
	// before it on a starved machine.
	exp := time.Now().Add(2 * time.Second)
	if err := h.st.CreateAgentToken(ctx, &store.AgentToken{ID: uuid.NewString(), TokenHash: auth.Hash(plain),
		Prefix: auth.Prefix(plain), Kind: store.AgentTokenStatic, ExpiresAt: &exp}); err != nil {
		t.Fatal(err)
	}
	c := h.agent("short", plain, "linux")
	assertKicked(t, c, ReasonTokenExpired)
	// At the expiry (stored to the millisecond), not a sweep later.
	if now := time.Now(); now.Before(exp.Add(-time.Millisecond)) || now.Sub(exp) > 3*time.Second {
		t.Fatalf("closed %s after the expiry, want within 0–3 s", now.Sub(exp))
	}
}

func TestDeclaredSecretsTravelInTheDispatch(t *testing.T) {
	var gotJob string
	var gotAgent AgentFacts
	h := newHarnessWith(t, Config{}, nil, Deps{JobData: func(ctx context.Context, run *store.Run, job *store.Job, agent AgentFacts) (JobData, error) {
		gotJob, gotAgent = job.ID, agent
		return JobData{Secrets: map[string]string{"release:npm_token": "v4lue"}, ContextVars: map[string]string{"REGION": "eu"}}, nil
	}})
	c := h.agent("a", h.staticToken(), "linux")
	j := h.job("linux")
	h.enqueue(j)
	jd := c.dispatch()
	if jd.Secrets["release:npm_token"] != "v4lue" || gotJob != j.ID {
		t.Fatalf("secrets %v (resolver saw %s)", jd.Secrets, gotJob)
	}
	if jd.ContextVars["REGION"] != "eu" {
		t.Fatalf("context vars %v", jd.ContextVars)
	}
	if gotAgent.ID != "a" || !slices.Contains(gotAgent.Labels, "linux") {
		t.Fatalf("resolver saw agent %+v", gotAgent)
	}
	// Nothing of the value leaks into the env sent with the job.
	if b, _ := json.Marshal(jd.Env); strings.Contains(string(b), "v4lue") {
		t.Fatalf("secret in env: %s", b)
	}
}

// A token's label scope is enforced at register (its first gate): a label
// outside it closes the socket with 4010; platform labels are always
// allowed.
func TestLabelScopeEnforcedAtRegister(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	plain, _, err := h.aa.IssueStatic(context.Background(), []string{"gpu"})
	if err != nil {
		t.Fatal(err)
	}
	h.agent("inside", plain, "gpu", "kici:os:linux", "kici:arch:amd64", "kici:host:x")
	if len(h.d.Agents()) != 1 {
		t.Fatal("agent within its label scope not registered")
	}
	c := h.dial()
	c.auth(plain)
	c.send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: "outside", Labels: []string{"gpu", "prod"}})
	if code, _ := c.closed(); code != protocol.CloseAuthFailed {
		t.Fatalf("label outside the scope: close %d, want 4010", code)
	}
	if len(h.d.Agents()) != 1 {
		t.Fatalf("agents %v", h.d.Agents())
	}
}

// Mandatory labels are a taint: the agent carries them and only runs jobs
// that ask for all of them; other jobs go to untainted agents or wait.
func TestMandatoryLabelsTaintTheAgent(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ctx := context.Background()
	plain := auth.NewAgentTokenPlaintext()
	if err := h.st.CreateAgentTokenAudited(ctx, &store.AgentToken{ID: uuid.NewString(), TokenHash: auth.Hash(plain),
		Prefix: auth.Prefix(plain), Kind: store.AgentTokenStatic, MandatoryLabels: []string{"secure"}}, nil); err != nil {
		t.Fatal(err)
	}
	// Queue an ordinary job before the tainted agent arrives: its
	// registration drain must not take it.
	plainJob := h.job("linux")
	h.enqueue(plainJob)
	c := h.dial()
	c.auth(plain)
	ack := c.register("tainted", "linux")
	if !slices.Contains(ack.Labels, "secure") {
		t.Fatalf("tainted agent labels %v lack the mandatory label", ack.Labels)
	}
	wait.For(t, 5*time.Second, "registration drain", func() bool { return h.d.queue.registering.Load() == 0 })
	if e := h.entry(plainJob.ID); e.Status != store.QueuePending {
		t.Fatalf("ordinary job went to the tainted agent: %+v", e)
	}
	// A job asking for the taint goes to it at once.
	secure := h.job("linux", "secure")
	h.enqueue(secure)
	tainted := h.d.Agents()[0]
	if tainted.ID != "tainted" {
		t.Fatalf("agents %v", h.d.Agents())
	}
	wait.For(t, 5*time.Second, "secure job dispatched to the tainted agent", func() bool {
		e := h.entry(secure.ID)
		return e.Status == store.QueueDispatched && e.AgentID == "tainted"
	})
	// An untainted agent takes the ordinary job.
	other := h.agent("plain", h.staticToken(), "linux")
	if jd := other.dispatch(); jd.JobID != plainJob.ID {
		t.Fatalf("ordinary job: %+v", jd)
	}
}

// The resolver learns the agent's token scope, not only the labels the
// agent reports: an agent whose token is scoped to [gpu] but that
// registers kici:host:deploybox is seen with TokenLabels [gpu]. (The job
// asks only for gpu: one pinning the host would not be routed to it,
// TestHostPinnedJobSkipsImpostorAgents.)
func TestJobDataSeesTheTokenScope(t *testing.T) {
	var got AgentFacts
	h := newHarnessWith(t, Config{}, nil, Deps{JobData: func(ctx context.Context, run *store.Run, job *store.Job, agent AgentFacts) (JobData, error) {
		got = agent
		return JobData{}, nil
	}})
	scoped, _, err := h.aa.IssueStatic(context.Background(), []string{"gpu"})
	if err != nil {
		t.Fatal(err)
	}
	c := h.agent("a", scoped, "gpu", "kici:host:deploybox")
	h.enqueue(h.job("gpu"))
	c.dispatch()
	if !slices.Contains(got.Labels, "kici:host:deploybox") || !slices.Equal(got.TokenLabels, []string{"gpu"}) {
		t.Fatalf("resolver saw %+v", got)
	}
}
