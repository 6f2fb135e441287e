package scaler

import (
	"context"
	"sync"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
)

// Backend starts and stops the agents of one scaler. Implementations:
// BareMetal (processes), Container (Docker Engine), Firecracker and QEMU
// (microVMs), and internal/scaler/kubernetes (pods).
type Backend interface {
	// Spawn starts one agent and returns once it is started (its process or
	// container runs). It must honour ctx: the Manager cancels it at the
	// spawn deadline. On error nothing of the agent may remain.
	Spawn(ctx context.Context, req *SpawnRequest) error
	// Destroy stops and removes agent id; unknown ids are ignored. The
	// backend reports the agent's end through the exit callback it was
	// built with.
	Destroy(ctx context.Context, id string) error
	// Shutdown destroys every agent of this backend and waits (bounded by
	// ctx) for them to end.
	Shutdown(ctx context.Context)
}

// SpawnRequest is what a backend needs to start one agent.
type SpawnRequest struct {
	// AgentID is the pre-minted id, scaler-<type>-<8 hex>.
	AgentID string
	// JobID and RunID are the job the agent is bound to.
	JobID, RunID string
	// Entry and LabelSet are the scaler and shape chosen for the job.
	Entry    *Entry
	LabelSet *LabelSet
	// OrchestratorURL is the WebSocket URL the agent dials.
	OrchestratorURL string
	// Token is the agent's ephemeral token (kat_…), bound to AgentID.
	Token string
	// Limits are the resolved resource limits (0 = none).
	Limits Limits
	// Emit records a lifecycle event on the job's provisioning log.
	Emit func(eventType EventType, detail string)
	// Warm marks an unbound warm-pool agent: it must wait for a job as long
	// as the pool keeps it (KICI_SCALER_IDLE_TIMEOUT is raised).
	Warm bool
	// Job is the bound job's container and services, filled for backends
	// that run them beside the agent (kubernetes: containers of the
	// agent's pod); nil when the job declares neither, for an unbound
	// agent, and for the other backends.
	Job *JobContainers
	// Pending shows why the spawn waits (e.g. "pod unschedulable: 0/3
	// nodes are available") as the bound job's pending reason; never nil.
	Pending func(reason string)
}

// JobContainers are the `container:` and `services:` of a bound job's lock
// entry (lockfile.LockJob.Container and .Services).
type JobContainers struct {
	// Container is the image the job's steps run in; nil: on the agent.
	Container *lockfile.Container
	// Services are the job's sidecar containers.
	Services []lockfile.Service
}

// Settings are the live knobs the Manager reads on every spawn (cluster
// settings, internal/cluster.Reader).
type Settings interface {
	// AgentTokenTTL is the lifetime of the next ephemeral agent token
	// (cluster setting agent_token_ttl_ms).
	AgentTokenTTL(ctx context.Context) time.Duration
	// ScalerSpawnTimeout is the deadline of one backend spawn call
	// (cluster setting scaler_spawn_timeout_ms).
	ScalerSpawnTimeout(ctx context.Context) time.Duration
}

// StaticSettings is a fixed Settings.
type StaticSettings struct {
	TokenTTL     time.Duration
	SpawnTimeout time.Duration
}

// AgentTokenTTL returns s.TokenTTL.
func (s StaticSettings) AgentTokenTTL(context.Context) time.Duration { return s.TokenTTL }

// ScalerSpawnTimeout returns s.SpawnTimeout.
func (s StaticSettings) ScalerSpawnTimeout(context.Context) time.Duration { return s.SpawnTimeout }

// EventLog receives provisioning log lines (logstore.FS: step -1 is the
// job-level bucket the API serves as the job's setup log).
type EventLog interface {
	Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error
}

// BackendFactory builds the backend of a scaler entry; exited must be
// called once when an agent the backend started has ended.
type BackendFactory func(e *Entry, exited func(agentID string, err error)) (Backend, error)

// waitEnded waits until done is closed (an agent's end has been handled
// and reported) or ctx ends, whichever comes first.
func waitEnded(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// destroyAll destroys the agents ids at once, each with destroy, and
// returns when every call has: a backend's Shutdown, which must not pay
// one stop grace per agent.
func destroyAll(ctx context.Context, ids []string, destroy func(ctx context.Context, id string) error) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { _ = destroy(ctx, id) })
	}
	wg.Wait()
}
