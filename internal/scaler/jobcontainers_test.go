package scaler

import (
	"context"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/spawn"
	"kici.dev/kici/internal/testutil/wait"
)

// pendingRegistry is a registry that also takes pending reasons
// (dispatch.Dispatcher.SetPendingReason).
type pendingRegistry struct {
	fakeRegistry
	mu      sync.Mutex
	reasons map[string]string
}

func (r *pendingRegistry) SetPendingReason(jobID, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons[jobID] = reason
}

func (r *pendingRegistry) reason(jobID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reasons[jobID]
}

// A kubernetes scaler's spawn request carries the bound job's container
// and services as the store holds them, and the backend's word on why the
// spawn waits becomes the job's pending reason; other backends are not
// given (nor is the store asked for) the job's containers.
func TestKubernetesSpawnCarriesJobContainersAndPendingReason(t *testing.T) {
	cfg, err := scalerconfig.Parse("test.yaml", []byte(`version: 1
scalers:
  - name: pods
    type: kubernetes
    maxAgents: 2
    labelSets:
      - labels: [pod]
        image: kici:dev
  - name: local
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [local]
`))
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]*fakeBackend{}
	var asked []string
	var askedMu sync.Mutex
	want := &JobContainers{Container: &lockfile.Container{Image: "golang:1.26"}, Services: []lockfile.Service{{Name: "db", Image: "postgres:17"}}}
	settings := &liveSettings{}
	settings.ttl.Store(int64(time.Hour))
	settings.timeout.Store(int64(5 * time.Second))
	m, err := NewManager(cfg, Options{Tokens: &fakeTokens{ttls: map[string]time.Duration{}}, Settings: settings,
		OrchestratorURL: "ws://kici:4000/ws",
		JobContainers: func(_ context.Context, jobID string) (*JobContainers, error) {
			askedMu.Lock()
			asked = append(asked, jobID)
			askedMu.Unlock()
			return want, nil
		},
		Backends: func(e *Entry, exited func(string, error)) (Backend, error) {
			b := &fakeBackend{name: e.Name, exited: exited, running: map[string]bool{}}
			backends[e.Name] = b
			return b, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	reg := &pendingRegistry{reasons: map[string]string{}}
	m.Serve(reg)

	if _, err := m.SpawnFor(context.Background(), spawn.Request{JobID: "j-pod", RunID: "r", RunsOn: []string{"pod"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SpawnFor(context.Background(), spawn.Request{JobID: "j-local", RunID: "r", RunsOn: []string{"local"}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "both agents started", func() bool {
		return backends["pods"].runningCount() == 1 && backends["local"].runningCount() == 1
	})
	pod := backends["pods"].reqs[0]
	if pod.Job != want {
		t.Errorf("kubernetes spawn request Job = %+v, want the job's container and services", pod.Job)
	}
	if local := backends["local"].reqs[0]; local.Job != nil {
		t.Errorf("bare-metal spawn request Job = %+v, want nil", local.Job)
	}
	askedMu.Lock()
	if len(asked) != 1 || asked[0] != "j-pod" {
		t.Errorf("job containers read for %v, want only j-pod", asked)
	}
	askedMu.Unlock()
	pod.Pending("pod unschedulable: 0/1 nodes are available")
	if got := reg.reason("j-pod"); got != "pod unschedulable: 0/1 nodes are available" {
		t.Errorf("pending reason = %q", got)
	}
}
