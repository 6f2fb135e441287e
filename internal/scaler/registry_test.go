package scaler

import (
	"context"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/spawn"
	"kici.dev/kici/internal/testutil/wait"
)

// fakeRegistry records the exits the Manager reports.
type fakeRegistry struct {
	mu    sync.Mutex
	exits []string
	jobs  map[string][]string
}

func (r *fakeRegistry) IdleAgents() map[string]bool { return map[string]bool{} }

func (r *fakeRegistry) AgentJobs() map[string][]string { return r.jobs }

func (r *fakeRegistry) AgentExited(agentID string, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits = append(r.exits, agentID)
}

func (r *fakeRegistry) exited(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.exits {
		if e == id {
			return true
		}
	}
	return false
}

// Once served, the Manager reports a spawned agent's end to the registry
// (the dispatcher) and reads idle agents from it.
func TestServeReportsExitsToTheRegistry(t *testing.T) {
	f := newMgr(t, twoScalers)
	if f.m.idleAgents() != nil {
		t.Fatal("a registry's idle agents before Serve")
	}
	reg := &fakeRegistry{}
	f.m.Serve(reg)
	if f.m.idleAgents() == nil {
		t.Fatal("Serve did not give the Manager the registry's idle agents")
	}
	id, err := f.m.SpawnFor(context.Background(), spawn.Request{JobID: "j1", RunID: "r1", RunsOn: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "agent started", func() bool { return f.backends["small"].runningCount() == 1 })
	f.backends["small"].end(id)
	wait.For(t, 5*time.Second, "exit reported to the registry", func() bool { return reg.exited(id) })
}
