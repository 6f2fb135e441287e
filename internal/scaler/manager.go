package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/protocol"
)

// ErrAtCapacity is dispatch.ErrAtCapacity: SpawnFor wraps it when the
// global or the scaler's agent cap is reached.
var ErrAtCapacity = dispatch.ErrAtCapacity

// Scaler lifecycle event types (KiCI ScalerEventType).
const (
	EventProvisioning = "scaler.provisioning"
	EventReady        = "scaler.ready"
	EventFailed       = "scaler.failed"
	EventConnecting   = "agent.connecting"
	EventDestroyed    = "scaler.destroyed"
)

// Backend starts and stops the agents of one scaler. Implementations:
// BareMetal (processes), Container (Docker Engine).
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
	Emit func(eventType, detail string)
	// Warm marks an unbound warm-pool agent: it must wait for a job as long
	// as the pool keeps it (KICI_SCALER_IDLE_TIMEOUT is raised).
	Warm bool
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
	// idle (dispatch.Dispatcher.Agents); warm pools start filling only
	// once it is set (here or with SetIdleAgents).
	IdleAgents func() map[string]bool
	// WarmPoolInterval is the warm-pool tick (default 30 s, KiCI); exits
	// and reloads also trigger a pass.
	WarmPoolInterval time.Duration
	// FailureBackoff is how long a job whose spawn failed waits before the
	// next spawn attempt; its pending reason shows the failure meanwhile
	// (default 30 s, KiCI's provisioning backoff base).
	FailureBackoff time.Duration
	// Logger logs spawns and failures.
	Logger *slog.Logger
}

// Manager is the auto-scaler (KiCI ScalerManager). It
// implements dispatch.Spawner, dispatch.LabelSpawner and
// dispatch.SpawnStopper. Safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	cfg      *Config
	scalers  []*scalerState // routable and retiring, config order first
	agents   map[string]*agentRec
	fails    map[string]failRec // last spawn failure per job
	onExit   func(agentID string, err error)
	closed   bool
	reloads  int
	ctx      context.Context
	cancel   context.CancelFunc
	spawnsWG sync.WaitGroup
	warmKick chan struct{}
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

// Agent states.
const (
	stateQueued   = "queued"   // reserved, waiting for a spawn slot
	stateSpawning = "spawning" // backend.Spawn in flight
	stateRunning  = "running"  // started; bound to its job until it ends
)

type agentRec struct {
	id, jobID, runID string
	sc               *scalerState
	ls               *LabelSet
	warm             bool      // unbound pool agent, not yet given a job
	idleSince        time.Time // first seen idle (warm agents)
	state            string
	createdAt        time.Time
	cancel           context.CancelFunc
	stop             bool // Stop asked while queued or spawning
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

// OnExit registers fn, called after an agent the Manager started has ended
// or its spawn failed (err says why); the orchestrator wires
// Dispatcher.AgentExited, which forgets the spawn and re-drives the queue
// (debounced) now that capacity is free. Set it before the first spawn.
func (m *Manager) OnExit(fn func(agentID string, err error)) {
	m.mu.Lock()
	m.onExit = fn
	m.mu.Unlock()
}

// CanServe reports whether some scaler has a label set for labels (no
// exclusions).
func (m *Manager) CanServe(labels []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := findBackend(m.scalers, labels, nil)
	return ok
}

// Spawn is SpawnFor with the job's id only (no labels: the first label set
// without a gate).
func (m *Manager) Spawn(ctx context.Context, jobID string) (string, error) {
	return m.SpawnFor(ctx, dispatch.ScaleRequest{JobID: jobID})
}

// SpawnFor picks the label set for the job (findBackend), reserves one
// agent against globalMaxAgents and the scaler's maxAgents (all or
// nothing), mints the agent id and returns it at once; the backend spawn
// runs in the background behind the scaler's FIFO semaphore and the spawn
// deadline. Errors: dispatch.ErrNoBackend (no label set matches), an error
// wrapping ErrAtCapacity (a cap is reached; counted as a refusal), the
// job's last spawn failure while its retry backoff runs, or "shutting
// down".
func (m *Manager) SpawnFor(_ context.Context, req dispatch.ScaleRequest) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", errors.New("scaler is shutting down")
	}
	c, ok := findBackend(m.scalers, req.RunsOn, req.Exclude)
	if !ok {
		return "", dispatch.ErrNoBackend
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
		sc: c.sc, ls: c.ls, state: stateQueued, createdAt: time.Now()}
	c.sc.active++
	delete(c.sc.refusedJobs, req.JobID)
	m.agents[rec.id] = rec
	m.updateGaugesLocked()
	m.spawnsWG.Add(1)
	go m.runSpawn(rec, c.ls)
	return rec.id, nil
}

// runSpawn waits for a spawn slot, then runs backend.Spawn under the live
// spawn deadline. At the deadline the backend's context is cancelled and
// the slot and reservation are released even if the backend has not
// returned yet (a late success is destroyed).
func (m *Manager) runSpawn(rec *agentRec, ls *LabelSet) {
	defer m.spawnsWG.Done()
	sc := rec.sc
	entry := sc.entry
	emit := func(t, d string) { m.emit(rec, t, d) }
	emit(EventProvisioning, fmt.Sprintf("scaler %s (%s): agent %s reserved for job, waiting for a spawn slot", entry.Name, entry.Type, rec.id))

	actx, acancel := context.WithCancel(m.ctx)
	m.mu.Lock()
	rec.cancel = acancel
	stopped := rec.stop
	m.mu.Unlock()
	if stopped {
		acancel()
	}
	if err := sc.sem.Acquire(actx); err != nil {
		acancel()
		m.spawnFailed(rec, errors.New("spawn cancelled before it started"), false)
		return
	}
	timeout := m.opts.Settings.ScalerSpawnTimeout(m.ctx)
	ttl := m.opts.Settings.AgentTokenTTL(m.ctx)
	ctx, cancel := context.WithTimeout(actx, timeout)
	defer cancel()
	defer acancel()
	m.mu.Lock()
	rec.state = stateSpawning
	sc.spawning++
	m.updateGaugesLocked()
	m.mu.Unlock()
	started := time.Now()

	done := make(chan error, 1)
	go func() {
		token, err := m.opts.Tokens.IssueEphemeralFor(ctx, rec.id, ls.Labels, ttl)
		if err != nil {
			done <- fmt.Errorf("agent token: %w", err)
			return
		}
		emit(EventProvisioning, fmt.Sprintf("spawning agent %s (token ttl %s, spawn deadline %s)", rec.id, ttl, timeout))
		m.mu.Lock()
		url := entry.OrchestratorURL
		if url == "" {
			url = m.opts.OrchestratorURL
		}
		limits := m.cfg.Limits(ls)
		m.mu.Unlock()
		done <- sc.backend.Spawn(ctx, &SpawnRequest{AgentID: rec.id, JobID: rec.jobID, RunID: rec.runID,
			Entry: entry, LabelSet: ls, OrchestratorURL: url, Token: token, Limits: limits, Emit: emit, Warm: rec.warm})
	}()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		timedOut = true
		go func() {
			// The backend saw the cancellation; if it still reports a
			// started agent, take it down.
			if e := <-done; e == nil {
				dctx, c := context.WithTimeout(context.Background(), 30*time.Second)
				_ = sc.backend.Destroy(dctx, rec.id)
				c()
			}
		}()
	}
	m.mu.Lock()
	sc.spawning--
	m.mu.Unlock()
	sc.sem.Release()
	if timedOut {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("spawn deadline of %s exceeded", timeout)
		default:
			err = errors.New("spawn cancelled")
		}
	}
	if err != nil {
		m.spawnFailed(rec, err, !timedOut || errors.Is(ctx.Err(), context.DeadlineExceeded))
		return
	}
	m.mu.Lock()
	rec.state = stateRunning
	sc.spawned++
	stop := rec.stop
	m.updateGaugesLocked()
	m.mu.Unlock()
	m.opts.Metrics.spawned(entry, time.Since(started))
	emit(EventReady, fmt.Sprintf("agent %s started in %s", rec.id, time.Since(started).Round(time.Millisecond)))
	emit(EventConnecting, fmt.Sprintf("agent %s connecting to the orchestrator", rec.id))
	m.log.Info("agent spawned", "scaler", entry.Name, "agent", rec.id, "job", rec.jobID, "took", time.Since(started))
	if stop {
		m.destroy(rec)
	}
}

// spawnFailed releases a reservation whose spawn did not produce an agent,
// records the failure on the job (it becomes the pending reason until the
// retry backoff passes) and reports the exit.
func (m *Manager) spawnFailed(rec *agentRec, err error, record bool) {
	entry := rec.sc.entry
	msg := fmt.Sprintf("scaler %s: agent %s: %v", entry.Name, rec.id, err)
	m.mu.Lock()
	if m.agents[rec.id] != rec {
		m.mu.Unlock()
		return
	}
	delete(m.agents, rec.id)
	rec.sc.active--
	if record && !m.closed && !rec.stop && rec.jobID != "" {
		rec.sc.failed++
		until := time.Now().Add(m.opts.FailureBackoff)
		m.fails[rec.jobID] = failRec{msg: fmt.Sprintf("%s (next attempt after %s)", msg, until.UTC().Format("15:04:05Z")), until: until}
	}
	m.updateGaugesLocked()
	fn := m.onExit
	m.mu.Unlock()
	if record {
		m.opts.Metrics.failure(entry)
	}
	m.revokeToken(rec.id)
	m.emit(rec, EventFailed, msg)
	m.log.Warn("agent spawn failed", "scaler", entry.Name, "agent", rec.id, "job", rec.jobID, "err", err)
	m.retireSweep()
	if fn != nil {
		fn(rec.id, err)
	}
}

// exitFor is the exit callback handed to scaler name's backend.
func (m *Manager) exitFor(name string) func(agentID string, err error) {
	return func(agentID string, err error) { m.agentExited(agentID, err) }
}

// agentExited releases an ended agent's reservation and reports the exit
// (capacity freed: the dispatcher re-drives pending jobs).
func (m *Manager) agentExited(agentID string, err error) {
	m.mu.Lock()
	rec := m.agents[agentID]
	if rec == nil || rec.state != stateRunning {
		// Unknown, or a spawn still unwinding (runSpawn owns it).
		m.mu.Unlock()
		return
	}
	delete(m.agents, agentID)
	rec.sc.active--
	m.updateGaugesLocked()
	fn := m.onExit
	m.mu.Unlock()
	m.revokeToken(agentID)
	detail := fmt.Sprintf("agent %s ended", agentID)
	if err != nil {
		detail += ": " + err.Error()
	}
	m.emit(rec, EventDestroyed, detail)
	m.retireSweep()
	m.kickWarm()
	if fn != nil {
		fn(agentID, err)
	}
}

// Stop destroys agent agentID (dispatch.SpawnStopper: the agent did not
// register in time). A spawn still queued or in flight is cancelled.
func (m *Manager) Stop(agentID string) {
	m.mu.Lock()
	rec := m.agents[agentID]
	if rec == nil {
		m.mu.Unlock()
		return
	}
	rec.stop = true
	running := rec.state == stateRunning
	cancel := rec.cancel
	m.mu.Unlock()
	if running {
		m.destroy(rec)
	} else if cancel != nil {
		cancel()
	}
}

func (m *Manager) destroy(rec *agentRec) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rec.sc.backend.Destroy(ctx, rec.id); err != nil {
			m.log.Warn("destroy agent", "agent", rec.id, "err", err)
		}
	}()
}

// emit records a lifecycle event in the job's provisioning log (the
// job-level log bucket, stream "scaler").
func (m *Manager) emit(rec *agentRec, eventType, detail string) {
	if m.opts.Events == nil || rec.runID == "" || rec.jobID == "" {
		return
	}
	line := protocol.LogLine{Timestamp: time.Now().UnixMilli(), Stream: "scaler", Text: "[" + eventType + "] " + detail}
	if err := m.opts.Events.Append(rec.runID, rec.jobID, -1, []protocol.LogLine{line}); err != nil {
		m.log.Warn("provisioning log", "job", rec.jobID, "err", err)
	}
}

// Reload applies a new configuration atomically: every check runs first
// and any failure (a changed type or socket, a backend that cannot be
// built) leaves the running configuration untouched. Kept scalers take
// their new caps, spawn limits and label sets; added scalers get a new
// backend; removed scalers are retired: no new spawns, their running
// agents finish their jobs, and the backend is shut down once none remain.
func (m *Manager) Reload(cfg *Config) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errors.New("scaler is shutting down")
	}
	old := map[string]*scalerState{}
	for _, sc := range m.scalers {
		if !sc.retiring {
			old[sc.entry.Name] = sc
		}
	}
	for _, e := range cfg.Scalers {
		if sc, ok := old[e.Name]; ok {
			if sc.entry.Type != e.Type {
				m.mu.Unlock()
				return &ConfigError{File: e.file, Field: "scalers[" + e.Name + "].type",
					Msg: fmt.Sprintf("cannot change from %s to %s on reload (remove the scaler, reload, then add it under a new name)", sc.entry.Type, e.Type)}
			}
			if sc.entry.SocketPath != e.SocketPath || sc.entry.EnforceCgroups != e.EnforceCgroups {
				m.mu.Unlock()
				return &ConfigError{File: e.file, Field: "scalers[" + e.Name + "]",
					Msg: "socketPath and enforceCgroups cannot change on reload (restart, or add the scaler under a new name)"}
			}
			if fcImmutableChanged(sc.entry, e) {
				m.mu.Unlock()
				return &ConfigError{File: e.file, Field: "scalers[" + e.Name + "]",
					Msg: "chrootBaseDir, uid, gid, the firecracker binary name and the firecracker: network block cannot change on reload (restart, or add the scaler under a new name)"}
			}
		}
	}
	for _, sc := range m.scalers {
		if sc.retiring {
			for _, e := range cfg.Scalers {
				if e.Name == sc.entry.Name {
					m.mu.Unlock()
					return &ConfigError{File: e.file, Field: "scalers[" + e.Name + "].name",
						Msg: "a scaler of this name is still retiring (its agents are finishing); reload again once it is gone"}
				}
			}
		}
	}
	m.mu.Unlock()

	// Build added backends outside the lock (they may touch the runtime).
	added := map[string]Backend{}
	for _, e := range cfg.Scalers {
		if _, ok := old[e.Name]; ok {
			continue
		}
		b, err := m.opts.Backends(e, m.exitFor(e.Name))
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for _, ab := range added {
				ab.Shutdown(ctx)
			}
			cancel()
			return fmt.Errorf("scaler %s: %w", e.Name, err)
		}
		added[e.Name] = b
	}

	m.mu.Lock()
	var next []*scalerState
	keep := map[string]bool{}
	for _, e := range cfg.Scalers {
		keep[e.Name] = true
		if sc, ok := old[e.Name]; ok {
			sc.entry = e
			sc.sem.Resize(e.MaxConcurrentSpawns)
			next = append(next, sc)
			continue
		}
		next = append(next, &scalerState{entry: e, backend: added[e.Name], sem: newFifoSem(e.MaxConcurrentSpawns)})
	}
	for _, sc := range m.scalers {
		if !keep[sc.entry.Name] || sc.retiring {
			if !sc.retiring {
				m.log.Info("scaler retired", "scaler", sc.entry.Name, "agents", sc.active)
			}
			sc.retiring = true
			next = append(next, sc)
		}
	}
	m.scalers = next
	m.cfg = cfg
	m.reloads++
	m.updateGaugesLocked()
	m.mu.Unlock()
	m.retireSweep()
	m.kickWarm()
	// Kept backends that leave host-side leftovers sweep them now (added
	// ones did at construction).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, sc := range old {
		if r, ok := sc.backend.(OrphanReaper); ok && keep[name] {
			if n, err := r.ReapOrphans(ctx); err != nil {
				m.log.Warn("orphan cleanup on reload", "scaler", name, "err", err)
			} else if n > 0 {
				m.log.Info("orphans removed on reload", "scaler", name, "count", n)
			}
		}
	}
	return nil
}

// OrphanReaper is implemented by backends that can find and remove agents
// they no longer track (Container); the Manager calls it on reload.
type OrphanReaper interface {
	ReapOrphans(ctx context.Context) (int, error)
}

// SetOrchestratorURL sets the default agent WebSocket URL (used by entries
// without orchestratorUrl); the orchestrator calls it once its listener is
// bound.
func (m *Manager) SetOrchestratorURL(url string) {
	m.mu.Lock()
	m.opts.OrchestratorURL = url
	m.mu.Unlock()
}

// retireSweep shuts down retiring backends with no agents left.
func (m *Manager) retireSweep() {
	m.mu.Lock()
	var gone []*scalerState
	kept := m.scalers[:0:0]
	for _, sc := range m.scalers {
		if sc.retiring && sc.active == 0 {
			gone = append(gone, sc)
			continue
		}
		kept = append(kept, sc)
	}
	m.scalers = kept
	m.mu.Unlock()
	for _, sc := range gone {
		go func(sc *scalerState) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sc.backend.Shutdown(ctx)
			m.log.Info("retired scaler shut down", "scaler", sc.entry.Name)
		}(sc)
	}
}

// Shutdown refuses further spawns, cancels spawns in flight and shuts down
// every backend (their agents are destroyed), bounded by ctx.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	scalers := append([]*scalerState(nil), m.scalers...)
	m.mu.Unlock()
	m.cancel()
	done := make(chan struct{})
	go func() { m.spawnsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
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
