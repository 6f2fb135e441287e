package scaler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

// TestWarmPoolFillsKeepsAndReapsOnlySurplus: a pool fills to its size, a
// pool at its target never churns, an agent that takes a job leaves the
// pool and is replaced, and lowering the size reaps only surplus agents
// idle longer than idleTimeoutSeconds (busy ones are left alone).
func TestWarmPoolFillsKeepsAndReapsOnlySurplus(t *testing.T) {
	doc := `version: 1
scalers:
  - name: s
    type: bare-metal
    maxAgents: 3
    warmPool: { enabled: true, size: 2, idleTimeoutSeconds: 1 }
    labelSets: [{labels: [x]}]
`
	cfg, err := scalerconfig.Parse("w.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var b *fakeBackend
	settings := &liveSettings{}
	settings.ttl.Store(int64(time.Hour))
	settings.timeout.Store(int64(5 * time.Second))
	var mu sync.Mutex
	registry := map[string]bool{} // agent id → idle
	m, err := NewManager(cfg, Options{Tokens: &fakeTokens{ttls: map[string]time.Duration{}}, Settings: settings,
		WarmPoolInterval: 20 * time.Millisecond,
		IdleAgents: func() map[string]bool {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]bool{}
			for k, v := range registry {
				out[k] = v
			}
			return out
		},
		AgentJobs: func() map[string][]string {
			mu.Lock()
			defer mu.Unlock()
			out := map[string][]string{}
			for k, idle := range registry {
				if !idle {
					out[k] = []string{"job-of-" + k}
				}
			}
			return out
		},
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b = &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}}
			return b, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	wait.For(t, 5*time.Second, "two warm agents", func() bool { return b.runningCount() == 2 })
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a spawn past the target that must not come
	if b.runningCount() != 2 || len(b.reqs) != 2 {
		t.Fatalf("pool overfilled before registration: %d spawned", len(b.reqs))
	}
	var ids []string
	b.mu.Lock()
	for _, r := range b.reqs {
		if !r.Warm || r.JobID != "" {
			t.Errorf("warm spawn request %+v", r)
		}
		ids = append(ids, r.AgentID)
	}
	b.mu.Unlock()
	mu.Lock()
	registry[ids[0]], registry[ids[1]] = true, true
	mu.Unlock()
	// At target: idle far beyond idleTimeoutSeconds, nothing churns.
	wait.Elapse(t.Context(), 1500*time.Millisecond) // idle past idleTimeoutSeconds: nothing may churn
	if b.runningCount() != 2 || len(b.reqs) != 2 {
		t.Fatalf("a pool at its target churned: %d running, %d spawned", b.runningCount(), len(b.reqs))
	}
	// ids[0] takes a job: it leaves the pool and a replacement is spawned.
	mu.Lock()
	registry[ids[0]] = false
	mu.Unlock()
	wait.For(t, 5*time.Second, "replacement spawned", func() bool { return b.runningCount() == 3 })
	st := m.Status().Scalers[0]
	warm := 0
	for _, a := range st.Agents {
		if a.Warm {
			warm++
		}
	}
	if st.Active != 3 || warm != 2 {
		t.Fatalf("status %+v", st)
	}
	// The agent handed a job through dispatch shows it, though it was
	// spawned without one.
	for _, a := range st.Agents {
		if want := map[bool]string{true: "job-of-" + ids[0]}[a.AgentID == ids[0]]; a.JobID != want {
			t.Errorf("agent %s shows job %q, want %q", a.AgentID, a.JobID, want)
		}
	}
	b.mu.Lock()
	third := b.reqs[2].AgentID
	b.mu.Unlock()
	mu.Lock()
	registry[third] = true
	mu.Unlock()

	// Size 0: the two idle warm agents are surplus and reaped once idle
	// for a second; the busy one keeps running.
	next, err := scalerconfig.Parse("w.yaml", []byte(strings.Replace(doc, "size: 2", "size: 0", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(next); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "surplus reaped", func() bool { return b.runningCount() == 1 })
	b.mu.Lock()
	busyAlive := b.running[ids[0]]
	b.mu.Unlock()
	if !busyAlive {
		t.Fatal("the busy agent was reaped")
	}
	wait.Elapse(t.Context(), 100*time.Millisecond) // room for a refill that must not come
	if len(b.reqs) != 3 {
		t.Fatalf("spawned %d agents, want 3 (no refill at size 0)", len(b.reqs))
	}
}

// A warm agent of a kubernetes scaler carries protocol.LabelWarmPod (in
// its labels and so in its token's scope); a job-bound one, and a warm
// agent of another backend, does not; the label set itself is untouched.
func TestWarmPodLabel(t *testing.T) {
	ls := &LabelSet{Labels: []string{"pod"}}
	k8s := &Entry{Type: TypeKubernetes}
	got := warmPodLabelSet(k8s, ls, true)
	if !slices.Equal(got.Labels, []string{"pod", protocol.LabelWarmPod}) || !slices.Equal(tokenScope(k8s, got), got.Labels) {
		t.Errorf("warm kubernetes agent labels %v, token scope %v", got.Labels, tokenScope(k8s, got))
	}
	if !slices.Equal(ls.Labels, []string{"pod"}) {
		t.Errorf("the label set changed: %v", ls.Labels)
	}
	if warmPodLabelSet(k8s, ls, false) != ls || warmPodLabelSet(&Entry{Type: TypeContainer}, ls, true) != ls {
		t.Error("a bound kubernetes agent or a warm container agent got the warm-pod label")
	}
}
