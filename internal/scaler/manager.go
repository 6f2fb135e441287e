package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/spawn"
)

// ErrAtCapacity is spawn.ErrAtCapacity: SpawnFor wraps it when the
// global or the scaler's agent cap is reached.
var ErrAtCapacity = spawn.ErrAtCapacity

// EventType names a scaler lifecycle event written to a job's provisioning
// log: one of the Event* constants (KiCI ScalerEventType, see
// docs/kici-compatibility.md#scaling).
type EventType string

// Scaler lifecycle event types (KiCI ScalerEventType).
const (
	// EventProvisioning: a step of starting the job's agent.
	EventProvisioning EventType = "scaler.provisioning"
	// EventReady: the agent is up.
	EventReady EventType = "scaler.ready"
	// EventFailed: starting the agent failed.
	EventFailed EventType = "scaler.failed"
	// EventConnecting: the agent is connecting to the orchestrator.
	EventConnecting EventType = "agent.connecting"
	// EventDestroyed: the agent was removed.
	EventDestroyed EventType = "scaler.destroyed"
)

// EventStream is the LogLine.Stream of the lifecycle events in a job's
// provisioning log.
const EventStream protocol.LogStream = "scaler"

// Options configure a Manager.
type Options struct {
	// Tokens mints the agents' ephemeral tokens (required).
	Tokens TokenIssuer
	// Settings supplies the live token TTL and spawn timeout (required).
	Settings Settings
	// OrchestratorURL is the default agent WebSocket URL (entries may
	// override it).
	OrchestratorURL string
	// Backends builds backends (required).
	Backends BackendFactory
	// Events, if set, receives the provisioning log of each job.
	Events EventLog
	// Metrics, if set, is updated on spawns, failures and refusals.
	Metrics *Metrics
	// IdleAgents reports the registered agents that are connected and
	// idle, agent id → idle; warm pools fill only while it is set and
	// answers non-nil (nil: no registry yet, the orchestrator is not
	// serving). Serve sets it (and Exited) from the dispatcher.
	IdleAgents func() map[string]bool
	// Exited, if set, is called after an agent the Manager started has
	// ended or its spawn failed (err says why); Serve points it at the
	// dispatcher, which forgets the spawn and re-drives the queue
	// (debounced) now that capacity is free.
	Exited func(agentID string, err error)
	// AgentJobs, set by Serve, maps each connected agent to the jobs it
	// runs as the dispatcher sees them, for Status.
	AgentJobs func() map[string][]string
	// JobContainers, if set, returns the container and services job jobID
	// declares (nil when none), for the backends that run them inside the
	// agent's own sandbox (TypeKubernetes): the orchestrator reads the
	// job's lock entry from the store.
	JobContainers func(ctx context.Context, jobID string) (*JobContainers, error)
	// PendingReason, set by Serve, records reason as job jobID's pending
	// reason while it is still queued (the dispatcher's).
	PendingReason func(jobID, reason string)
	// WarmPoolInterval is the warm-pool tick (default 30 s, KiCI); exits
	// and reloads also trigger a pass.
	WarmPoolInterval time.Duration
	// FailureBackoff is how long a job whose spawn failed waits before the
	// next spawn attempt; its pending reason shows the failure meanwhile
	// (default 30 s, KiCI's provisioning backoff base).
	FailureBackoff time.Duration
	// DisconnectGrace is how long after a VM agent's disconnect its VM may
	// take to end on its own before the Manager destroys it (default 10 s;
	// AgentDisconnected).
	DisconnectGrace time.Duration
	// Logger logs spawns and failures.
	Logger *slog.Logger
}

// Manager is the auto-scaler (KiCI ScalerManager). It
// implements dispatch.Spawner. Safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	cfg      *Config
	scalers  []*scalerState // routable and retiring, config order first
	agents   map[string]*agentRec
	fails    map[string]failRec // last spawn failure per job
	closed   bool
	reloads  int
	ctx      context.Context
	cancel   context.CancelFunc
	spawnsWG sync.WaitGroup
	warmKick chan struct{}
	// refillPending is set while an AgentTookJob refill waits its delay.
	refillPending atomic.Bool
}

type scalerState struct {
	entry    *Entry
	backend  Backend
	sem      *fifoSem
	active   int // reserved: queued for a slot, spawning or alive
	spawning int // inside backend.Spawn
	retiring bool
	spawned  int64
	failed   int64
	refused  int64
	// refusedJobs are the jobs refused at a cap and not yet spawned for.
	refusedJobs map[string]bool
}

// AgentState is where a scaler's agent is in its life (AgentStatus.State):
// one of the Agent* constants, a kici vocabulary of the admin scaler view.
type AgentState string

// Agent states.
const (
	// AgentQueued: reserved for a job, waiting for a spawn slot.
	AgentQueued AgentState = "queued"
	// AgentSpawning: the backend's Spawn is in flight.
	AgentSpawning AgentState = "spawning"
	// AgentRunning: started; bound to its job until it ends.
	AgentRunning AgentState = "running"
)

type agentRec struct {
	id, jobID, runID string
	sc               *scalerState
	ls               *LabelSet
	warm             bool      // unbound pool agent, not yet given a job
	idleSince        time.Time // first seen idle (warm agents)
	state            AgentState
	createdAt        time.Time
	cancel           context.CancelFunc
	stop             bool // Stop asked while queued or spawning
	stopReason       string
}

type failRec struct {
	msg   string
	until time.Time
}

// NewManager builds the backends of cfg and returns a Manager. A backend
// that cannot be built fails the whole call (nothing is left running).
func NewManager(cfg *Config, opts Options) (*Manager, error) {
	if opts.Tokens == nil || opts.Settings == nil || opts.Backends == nil {
		return nil, errors.New("scaler: Tokens, Settings and Backends are required")
	}
	if opts.FailureBackoff <= 0 {
		opts.FailureBackoff = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WarmPoolInterval <= 0 {
		opts.WarmPoolInterval = 30 * time.Second
	}
	if opts.DisconnectGrace <= 0 {
		opts.DisconnectGrace = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, log: opts.Logger, cfg: cfg, agents: map[string]*agentRec{},
		fails: map[string]failRec{}, ctx: ctx, cancel: cancel}
	for _, e := range cfg.Scalers {
		b, err := opts.Backends(e, m.exitFor(e.Name))
		if err != nil {
			cancel()
			sctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
			for _, sc := range m.scalers {
				sc.backend.Shutdown(sctx)
			}
			c2()
			return nil, fmt.Errorf("scaler %s: %w", e.Name, err)
		}
		m.scalers = append(m.scalers, &scalerState{entry: e, backend: b, sem: newFifoSem(e.MaxConcurrentSpawns)})
	}
	m.updateGauges()
	m.warmKick = make(chan struct{}, 1)
	go m.warmLoop()
	return m, nil
}

// SpawnFor picks the label set for the job (findBackend), reserves one
// agent against globalMaxAgents and the scaler's maxAgents (all or
// nothing), mints the agent id and returns it at once; the backend spawn
// runs in the background behind the scaler's FIFO semaphore and the spawn
// deadline. Errors: spawn.ErrNoBackend (no label set matches), an error
// wrapping ErrAtCapacity (a cap is reached; counted as a refusal), the
// job's last spawn failure while its retry backoff runs, or "shutting
// down".
func (m *Manager) SpawnFor(_ context.Context, req spawn.Request) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", errors.New("scaler is shutting down")
	}
	c, ok := findBackend(m.scalers, req.RunsOn, req.Exclude)
	if !ok {
		return "", spawn.ErrNoBackend
	}
	if f, ok := m.fails[req.JobID]; ok {
		if time.Now().Before(f.until) {
			return "", errors.New(f.msg)
		}
		delete(m.fails, req.JobID)
	}
	total := 0
	for _, sc := range m.scalers {
		total += sc.active
	}
	if total >= m.cfg.GlobalMaxAgents {
		m.refuseLocked(c.sc, req.JobID)
		return "", fmt.Errorf("%w (global: %d/%d agents)", ErrAtCapacity, total, m.cfg.GlobalMaxAgents)
	}
	if c.sc.active >= c.sc.entry.MaxAgents {
		m.refuseLocked(c.sc, req.JobID)
		return "", fmt.Errorf("%w (scaler %s: %d/%d agents)", ErrAtCapacity, c.sc.entry.Name, c.sc.active, c.sc.entry.MaxAgents)
	}
	rec := &agentRec{id: newAgentID(c.sc.entry), jobID: req.JobID, runID: req.RunID,
		sc: c.sc, ls: c.ls, state: AgentQueued, createdAt: time.Now()}
	c.sc.active++
	delete(c.sc.refusedJobs, req.JobID)
	m.agents[rec.id] = rec
	m.updateGaugesLocked()
	m.spawnsWG.Add(1)
	go m.runSpawn(rec, c.ls)
	return rec.id, nil
}

// Shutdown refuses further spawns, cancels spawns in flight and shuts down
// every backend (their agents are destroyed), bounded by ctx.
func (m *Manager) Shutdown(ctx context.Context) {
	m.stopSpawning(ctx)
	m.shutdownBackends(ctx)
}

// stopSpawning refuses further spawns, cancels those in flight and waits
// for them to end, bounded by ctx.
func (m *Manager) stopSpawning(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	done := make(chan struct{})
	go func() { m.spawnsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// shutdownBackends shuts every backend down in parallel (the agents they
// still hold are destroyed), bounded by ctx.
func (m *Manager) shutdownBackends(ctx context.Context) {
	m.mu.Lock()
	scalers := append([]*scalerState(nil), m.scalers...)
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, sc := range scalers {
		wg.Add(1)
		go func() { defer wg.Done(); sc.backend.Shutdown(ctx) }()
	}
	wg.Wait()
}

func (m *Manager) updateGauges() {
	m.mu.Lock()
	m.updateGaugesLocked()
	m.mu.Unlock()
}

func (m *Manager) updateGaugesLocked() {
	if m.opts.Metrics == nil {
		return
	}
	for _, sc := range m.scalers {
		m.opts.Metrics.gauges(sc.entry, sc.active, sc.spawning)
	}
}

// Metrics returns the Metrics the Manager updates (may be nil).
func (m *Manager) Metrics() *Metrics { return m.opts.Metrics }
