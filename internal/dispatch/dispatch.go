// Package dispatch hands queued jobs to agents over the agent WebSocket
// channel (see docs/kici-compatibility.md#agent-protocol).
//
// The Dispatcher owns the in-memory agent registry (one entry per
// registered agent id), the job→agent tracking, the dispatch ack deadlines
// and the routing of queued jobs: a ready job goes to the idle connected
// agent with the lowest id whose labels contain the job's runsOn labels
// (and none of its exclude labels); failing that, the Spawner (auto-scaler)
// is asked for an agent bound to the job; failing that, the job waits in the
// queue with a pending reason. Every queue transition goes through the
// store's conditional, atomic claims, so two concurrent drains can never
// hand one entry to two agents, and a replayed terminal status completes a
// job exactly once.
//
// Disconnect triage. When an agent's socket ends (closed, heartbeat timeout,
// ack timeout): a job that was dispatched but never reported running is put
// back in the queue (attempts+1, failing at MaxAttempts); a started job on an
// ephemeral (scaler-managed, single-use) agent fails at once with "agent
// lost" because that agent cannot come back. A started job on a static
// agent stays owned by that agent id: when the agent reconnects and lists
// the job in agent.register's inFlightJobs, tracking resumes and its later
// statuses are accepted. Meanwhile the job is "recovering"; an agent that
// does not return within
// Config.RecoveryWindow (KiCI's 120 s), or returns without the job, fails
// it (recovery.go).
package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"kici.dev/kici/internal/runs"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/spawn"
	"kici.dev/kici/internal/store"
)

// JobEvents receives the job lifecycle the agents report: the runs
// package's interface, implemented by runs.Tracker.
type JobEvents = runs.JobReports

// LogSink stores step log lines (implemented by logstore.FS and
// logstore.PG).
type LogSink interface {
	// Append adds lines to the log of step stepIndex (-1: job-level bucket),
	// for agents that do not number their lines.
	Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error
	// AppendFrom stores lines numbered from offset, skipping those already
	// held (logstore.Store.AppendFrom). It is what lets the dispatcher
	// negotiate LogAcks: agents number their lines, keep each chunk until it
	// is acknowledged, and replay the unacknowledged ones after a reconnect.
	AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (logstore.AppendResult, error)
}

// Spawner starts agents for jobs that no connected agent can take
// (implemented by scaler.Manager, which chooses among several backends by
// the job's labels). Its methods must return promptly: a spawn itself runs
// in the background.
type Spawner interface {
	// SpawnFor starts one ephemeral agent bound to req.JobID and returns its
	// agent id. It returns ErrNoBackend when no backend serves the labels
	// (the job keeps its no-agent reason), an error wrapping ErrAtCapacity
	// when a cap is reached (its text is then the job's pending reason,
	// e.g. "scaler at capacity (4/4 agents)"), any other error as the job's
	// "spawn failed: …" reason.
	SpawnFor(ctx context.Context, req ScaleRequest) (agentID string, err error)
	// Stop terminates a spawned agent that never registered within
	// Config.SpawnTimeout, or whose job ended before it registered; unknown
	// ids are ignored.
	Stop(agentID string)
	// AgentRegistered hears that a scaler-managed agent has registered
	// (after any pending job was offered to it), so a warm pool can count
	// the agent ready at once rather than at its next check.
	AgentRegistered(agentID string)
	// AgentDisconnected hears that a scaler-managed agent's connection has
	// ended (after the disconnect triage), so a backend whose agent runs
	// inside a machine of its own (a VM) can make sure that machine ends
	// too: such an agent cannot come back, its token dies with the socket.
	AgentDisconnected(agentID string)
}

// ScaleRequest describes a job a Spawner is asked to start an agent for
// (KiCI requestScale arguments); it is the spawn package's, shared with the
// scaler.
type ScaleRequest = spawn.Request

// ErrNoBackend is returned by Spawner.SpawnFor when no backend serves the
// job's labels (spawn.ErrNoBackend).
var ErrNoBackend = spawn.ErrNoBackend

// ErrAtCapacity is wrapped by Spawner.SpawnFor errors when no further agent
// may be started (spawn.ErrAtCapacity). It lives below both dispatch and the
// scaler, so that neither imports the other.
var ErrAtCapacity = spawn.ErrAtCapacity

// Config tunes the dispatcher. Zero fields take the defaults shown.
type Config struct {
	// AckTimeout is how long an agent has to answer job.dispatch with
	// job.ack, job.reject or job.status running (10 s;
	// KICI_DISPATCH_ACK_TIMEOUT_MS).
	AckTimeout time.Duration
	// AckTimeoutFunc, when set, returns the ack deadline live, read once
	// per dispatch (the cluster setting dispatch_ack_timeout_ms); nil or a
	// value ≤ 0 means AckTimeout.
	AckTimeoutFunc func(ctx context.Context) time.Duration
	// MaxAttempts is the number of dispatch attempts after which a job that
	// keeps coming back to the queue fails (5; KiCI MAX_DISPATCH_ATTEMPTS).
	MaxAttempts int
	// HeartbeatTimeout closes (4004) a registered agent that sent no frame
	// for this long (180 s).
	HeartbeatTimeout time.Duration
	// HeartbeatCheckInterval is the heartbeat monitor period (30 s).
	HeartbeatCheckInterval time.Duration
	// AuthTimeout bounds the wait for auth.request (5 s).
	AuthTimeout time.Duration
	// RegisterTimeout bounds the wait for agent.register after auth (10 s).
	RegisterTimeout time.Duration
	// SpawnTimeout is how long a spawned agent may take to register before
	// its job is unpinned and routed again (60 s).
	SpawnTimeout time.Duration
	// RedriveInterval is the period of the pending-queue re-drive (2 s).
	RedriveInterval time.Duration
	// RecoveryWindow is how long a static agent that disconnected may take
	// to come back and reclaim its running jobs before they fail (120 s,
	// KiCI's recovery grace; recovery.go).
	RecoveryWindow time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.AckTimeout, 10*time.Second)
	def(&c.HeartbeatTimeout, 180*time.Second)
	def(&c.HeartbeatCheckInterval, 30*time.Second)
	def(&c.AuthTimeout, 5*time.Second)
	def(&c.RegisterTimeout, 10*time.Second)
	def(&c.SpawnTimeout, 60*time.Second)
	def(&c.RedriveInterval, 2*time.Second)
	def(&c.RecoveryWindow, 120*time.Second)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	return c
}

// ownershipGrace keeps a finished job owned by its agent for late messages
// (30 s, as in KiCI).
const ownershipGrace = 30 * time.Second

// AgentInfo describes one registered agent for admin listings.
type AgentInfo struct {
	// ID is the agent id from agent.register.
	ID string `json:"agentId"`
	// Labels are the labels it registered with (auto labels included).
	Labels []string `json:"labels"`
	// ScalerManaged is true for single-use agents (ephemeral token or
	// scalerManaged in agent.register).
	ScalerManaged bool `json:"scalerManaged"`
	// Ephemeral is true when the agent authenticated with an ephemeral token.
	Ephemeral bool `json:"ephemeral"`
	// MaxConcurrency is the number of jobs it may run at once (1 unless the
	// agent announced more).
	MaxConcurrency int `json:"maxConcurrency"`
	// ActiveJobs is the number of slots in use (dispatcher's count).
	ActiveJobs int `json:"activeJobs"`
	// JobIDs are the unfinished jobs it owns, sorted.
	JobIDs []string `json:"jobIds"`
	// Version is the agent version it reported.
	Version string `json:"version,omitempty"`
	// Hostname is the host name it reported.
	Hostname string `json:"hostname,omitempty"`
	// ConnectedAt is when its socket was accepted (UTC).
	ConnectedAt time.Time `json:"connectedAt"`
	// LastSeenAt is when its last frame arrived (UTC).
	LastSeenAt time.Time `json:"lastHeartbeatAt"`
}

// Dispatcher routes queued jobs to agents; see the package documentation.
// It is the wiring of three components, each owning its state under its
// own lock:
//
//   - registry (registry.go, handshake.go, register.go, session.go,
//     disconnect.go, recovery.go, ownership.go, slots.go): the agent
//     sockets, handshake, registration, sessions, disconnect triage and
//     the job→agent ownership with the agents' slots (registry.mu);
//   - jobQueue (jobqueue.go, queue.go, route.go, pending.go,
//     pendingsync.go, control.go, spawnstop.go, peers.go): the pending
//     queue and routing: the pending index, pending reasons, spawned
//     agents, drain mode, the re-drive (routeMu serialises routing
//     decisions; jobQueue.mu guards its maps; pendingIndex.mu the index);
//   - frameHandler (frames.go, messages.go, logs.go, outputs.go,
//     provenance.go): what registered agents send back (acks, step and
//     job statuses, logs, outputs, provenance), reported to the JobEvents
//     and the LogSink (frameHandler.mu guards the receiver).
//
// Lock order: jobQueue.routeMu → jobQueue.mu → registry.mu →
// pendingIndex.mu; frameHandler.mu is a leaf, as is pendingIndex.mu. No
// component calls into another while holding its own mutex except along
// this order, and no frame is written to a socket under any of them.
type Dispatcher struct {
	log   *slog.Logger
	reg   *registry
	queue *jobQueue
	frame *frameHandler
	// peers reaches the other nodes of a cluster (peers.go); nil on a
	// single node.
	peers Peers

	// lifeMu guards started; it is taken before registry.mu.
	lifeMu   sync.Mutex
	started  bool
	ctx      context.Context
	cancel   context.CancelFunc
	loopDone chan struct{}
}

// core is what every component shares; set by New and never changed.
type core struct {
	cfg Config
	st  store.Store
	log *slog.Logger
	// ctx ends when the dispatcher shuts down.
	ctx context.Context
}

// Deps are a dispatcher's collaborators beyond the store; only Events is
// required.
type Deps struct {
	// Events receives job lifecycle events (runs.Tracker).
	Events JobEvents
	// JobData resolves a job's secrets and context variables for every
	// job.dispatch; nil sends no secret values and no context variables.
	JobData JobDataResolver
	// Attester enables provenance.attest; nil answers such requests with
	// an error ("provenance signing is not configured").
	Attester Attester
	// AckObserver observes dispatch latency (metrics); nil observes
	// nothing.
	AckObserver AckObserver
	// Peers reaches agents connected to other nodes of a cluster (cancel);
	// nil on a single node.
	Peers Peers
	// Sessions are the agent sessions every node of a cluster shares,
	// consulted and recorded as node NodeID; nil on a single node.
	Sessions SharedSessions
	NodeID   string
}

// New returns a Dispatcher over st with the collaborators of deps. logs and
// spawner may be nil (no log storage, no auto-scaling). Call Start to run
// the background loops.
func New(cfg Config, st store.Store, agentAuth *auth.AgentAuth, logs LogSink, spawner Spawner, logger *slog.Logger, deps Deps) *Dispatcher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &core{cfg: cfg.withDefaults(), st: st, log: logger, ctx: ctx}
	reg := &registry{core: c, agentAuth: agentAuth, shared: deps.Sessions, nodeID: deps.NodeID,
		spawner: spawner, ackObserver: deps.AckObserver,
		agents: map[string]*agentConn{}, jobs: map[string]*jobState{},
		conns: map[*agentConn]bool{}, sessions: map[string]*agentSession{}}
	q := &jobQueue{core: c, spawner: spawner, secretResolver: deps.JobData, pending: newPendingIndex(),
		reasons: map[string]string{}, reasonW: newReasonWriter(st, logger), spawns: map[string]*spawnRec{}, kick: make(chan struct{}, 1)}
	fr := &frameHandler{core: c, logs: logs, attester: deps.Attester, events: deps.Events}
	reg.q, reg.fr = q, fr
	q.reg, q.fr = reg, fr
	fr.reg, fr.q = reg, q
	return &Dispatcher{log: logger, reg: reg, queue: q, frame: fr, peers: deps.Peers,
		ctx: ctx, cancel: cancel, loopDone: make(chan struct{})}
}

// Start runs the background loop until Shutdown: the pending-queue re-drive
// (every RedriveInterval and shortly after capacity is freed), spawn
// timeouts, the sweep of persisted ack deadlines that expired while no
// timer was armed (after a restart), and the heartbeat monitor. Calling it
// twice has no further effect.
func (d *Dispatcher) Start(ctx context.Context) {
	d.lifeMu.Lock()
	if d.started || d.reg.isClosed() {
		d.lifeMu.Unlock()
		return
	}
	d.started = true
	d.lifeMu.Unlock()
	if err := d.queue.loadPending(ctx); err != nil {
		// The loop retries at its next resync; routing meanwhile sees the
		// jobs enqueued since this process started.
		d.log.Error("load pending queue", "err", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			d.cancel()
		case <-d.ctx.Done():
		}
	}()
	go d.loop()
}

// Shutdown stops the background loop and closes every agent socket with
// 1001 (going away). Jobs stay as they are in the store: dispatched jobs are
// reclaimed when their agents reconnect to the next orchestrator process.
// It waits for connection handlers to finish, and for the pending reasons
// decided so far to be written, or for ctx to end.
func (d *Dispatcher) Shutdown(ctx context.Context) {
	d.lifeMu.Lock()
	started := d.started
	conns, ok := d.reg.close()
	d.lifeMu.Unlock()
	if !ok {
		return
	}
	for _, c := range conns {
		c.close(protocol.CloseGoingAway, "orchestrator shutting down")
	}
	waitFor(ctx, d.reg.handlers.Wait)
	// Cancelling first would tear the sockets down before the 1001 frames
	// went out.
	d.cancel()
	if started {
		select {
		case <-d.loopDone:
		case <-ctx.Done():
		}
	}
	// The pending reasons decided before the sockets closed still land.
	waitFor(ctx, d.queue.reasonW.wait)
}

// waitFor returns when wait returns or ctx ends, whichever is first (wait
// then goes on in its goroutine).
func waitFor(ctx context.Context, wait func()) {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// resyncEvery is how often the pending index is merged with the store:
// resyncInterval while other nodes may enqueue, loneResyncInterval when
// this node is alone on its database.
func (d *Dispatcher) resyncEvery() time.Duration {
	if d.peers == nil || d.peers.Alone() {
		return loneResyncInterval
	}
	return resyncInterval
}

// loop is the single background goroutine.
func (d *Dispatcher) loop() {
	defer close(d.loopDone)
	redrive := time.NewTicker(d.reg.cfg.RedriveInterval)
	defer redrive.Stop()
	hb := time.NewTicker(d.reg.cfg.HeartbeatCheckInterval)
	defer hb.Stop()
	var lastSweep time.Time
	lastResync := time.Now()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-hb.C:
			d.reg.checkHeartbeats()
			continue
		case <-redrive.C:
		case <-d.queue.kick:
			// Debounce: let a burst of freed slots settle into one pass.
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		d.queue.expireSpawns()
		d.reg.expireRecoveries()
		if time.Since(lastSweep) >= 10*time.Second {
			lastSweep = time.Now()
			d.queue.sweepAckDeadlines()
		}
		if time.Since(lastResync) >= d.resyncEvery() {
			lastResync = time.Now()
			if err := d.queue.loadPending(d.ctx); err != nil {
				d.log.Warn("merge pending queue", "err", err)
			}
		}
		d.queue.redrive()
		d.reg.pruneDone()
	}
}
