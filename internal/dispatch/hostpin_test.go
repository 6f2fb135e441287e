package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// Attack: any agent may report kici:host:deploybox (platform labels are
// outside a token's scope), so a job pinned to that host must only be
// routed to an agent whose token was minted for it. Impostors with an
// unscoped token, a token scoped without the host and a token minted for
// another host are never sent the job, whether it was queued before they
// registered (their registration drain) or after (the enqueue route); it
// waits saying which token it needs, and the agent whose token lists
// kici:host:deploybox takes it.
func TestHostPinnedJobSkipsImpostorAgents(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	scoped := func(labels ...string) string {
		p, _, err := h.aa.IssueStatic(context.Background(), labels)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	const host = "kici:host:deploybox"
	early := h.job("deploy", host)
	h.enqueue(early)
	h.agent("unscoped", h.staticToken(), "deploy", host)
	h.agent("scoped-without-host", scoped("deploy"), "deploy", host)
	h.agent("other-host", scoped("deploy", "kici:host:otherbox"), "deploy", host)
	if e := h.entry(early.ID); e.Status != store.QueuePending {
		t.Fatalf("job queued before the impostors registered went to %s", e.AgentID)
	}
	late := h.job("deploy", host)
	h.enqueue(late)
	if e := h.entry(late.ID); e.Status != store.QueuePending {
		t.Fatalf("job queued while impostors were idle went to %s", e.AgentID)
	}
	want := "waiting for an agent whose token was minted for " + host
	if r := h.getJob(late.ID).PendingReason; !strings.Contains(r, want) {
		t.Fatalf("pending reason %q, want it to contain %q", r, want)
	}
	// An ordinary job still goes to the impostors: only the host pin is
	// refused them.
	plain := h.job("deploy")
	h.enqueue(plain)
	wait.For(t, 5*time.Second, "unpinned job dispatched", func() bool { return h.entry(plain.ID).Status == store.QueueDispatched })
	if id := h.entry(plain.ID).AgentID; id != "other-host" && id != "scoped-without-host" && id != "unscoped" {
		t.Fatalf("unpinned job went to %q", id)
	}

	right := h.agent("deploybox", scoped("deploy", host), "deploy", host)
	if jd := right.dispatch(); jd.JobID != early.ID {
		t.Fatalf("the host's agent got %s, want the oldest pinned job %s", jd.JobID, early.ID)
	}
	for _, j := range []*store.Job{early, late} {
		if e := h.entry(j.ID); e.Status == store.QueueDispatched && e.AgentID != "deploybox" {
			t.Fatalf("pinned job %s went to impostor %s", j.ID, e.AgentID)
		}
	}
}

// UnvouchedHost names the first pinned host a token scope does not list.
func TestUnvouchedHost(t *testing.T) {
	for _, c := range []struct {
		runsOn, token []string
		want          string
	}{
		{[]string{"linux"}, nil, ""},
		{[]string{"linux", "kici:host:a"}, nil, "kici:host:a"},
		{[]string{"kici:host:a"}, []string{"kici:host:b"}, "kici:host:a"},
		{[]string{"kici:host:a"}, []string{"linux", "kici:host:a"}, ""},
	} {
		if got := UnvouchedHost(c.runsOn, c.token); got != c.want {
			t.Errorf("UnvouchedHost(%v, %v) = %q, want %q", c.runsOn, c.token, got, c.want)
		}
	}
}
