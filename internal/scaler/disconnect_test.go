package scaler

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/testutil/wait"
)

// fakeVMBackend is a fakeBackend whose agents run in VMs of their own.
type fakeVMBackend struct{ *fakeBackend }

func (fakeVMBackend) endsWithAgent() {}

// A VM whose agent disconnected but that does not end on its own (a
// guest that fails to power off) is destroyed after the grace, so it
// never serves a second job nor holds its slot; an agent whose VM ends
// in time, and agents of other backends, are left to end on their own.
func TestVMOfDisconnectedAgentIsDestroyedAfterGrace(t *testing.T) {
	cfg, err := scalerconfig.Parse("test.yaml", []byte(twoScalers))
	must(t, err)
	f := &mgrFixture{backends: map[string]*fakeBackend{}, tokens: &fakeTokens{ttls: map[string]time.Duration{}},
		settings: &liveSettings{}, log: &memLog{lines: map[string][]string{}}, exits: map[string]error{}}
	f.settings.ttl.Store(int64(time.Hour))
	f.settings.timeout.Store(int64(5 * time.Second))
	var vmScaler string
	f.m, err = NewManager(cfg, Options{Tokens: f.tokens, Settings: f.settings, Exited: f.recordExit, OrchestratorURL: "ws://127.0.0.1:1/ws",
		Events: f.log, FailureBackoff: time.Minute, DisconnectGrace: 300 * time.Millisecond,
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b := &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}}
			f.backends[e.Name] = b
			if vmScaler == "" {
				vmScaler = e.Name
				return fakeVMBackend{b}, nil
			}
			return b, nil
		}})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.m.Shutdown(ctx)
	})
	var vmLabels, otherLabels []string
	for _, e := range cfg.Scalers {
		if e.Name == vmScaler {
			vmLabels = e.LabelSets[0].Labels
		} else {
			otherLabels = e.LabelSets[0].Labels
		}
	}
	spawn := func(job string, labels []string) string {
		id, err := f.m.SpawnFor(context.Background(), dispatch.ScaleRequest{JobID: job, RunID: "r", RunsOn: labels})
		must(t, err)
		wait.For(t, 5*time.Second, job+"'s agent running", func() bool {
			for _, sc := range f.m.Status().Scalers {
				for _, a := range sc.Agents {
					if a.AgentID == id {
						return a.State == AgentRunning
					}
				}
			}
			return false
		})
		return id
	}
	stuck, ends, plain := spawn("job-stuck", vmLabels), spawn("job-ends", vmLabels), spawn("job-plain", otherLabels)
	for _, id := range []string{stuck, ends, plain} {
		f.m.AgentDisconnected(id)
	}
	f.backends[vmScaler].end(ends) // powers off on its own, within the grace
	wait.For(t, 5*time.Second, "the stuck VM to be destroyed", func() bool { _, ok := f.exit(stuck); return ok })
	if f.backends[vmScaler].runningCount() != 0 {
		t.Fatalf("VMs still running after the grace: %d", f.backends[vmScaler].runningCount())
	}
	wait.Elapse(t.Context(), 500*time.Millisecond) // past the grace: room for a destroy that must not come
	if _, ok := f.exit(plain); ok {
		t.Fatal("a non-VM agent was destroyed on disconnect")
	}
	if n := f.backends[otherName(cfg, vmScaler)].runningCount(); n != 1 {
		t.Fatalf("non-VM agents running: %d, want 1", n)
	}
}

func otherName(cfg *Config, not string) string {
	for _, e := range cfg.Scalers {
		if e.Name != not {
			return e.Name
		}
	}
	return ""
}
