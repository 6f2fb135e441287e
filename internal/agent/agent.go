package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/agent/conn"
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/protocol"
)

// Shutdown flush bounds: how long the agent waits to deliver its queued
// frames (reconnecting if needed) before exiting.
const (
	// JobDoneFlushTimeout applies after a scaler-managed agent's job; it
	// covers a reconnect at the maximum backoff.
	JobDoneFlushTimeout = 2 * time.Minute
	// SignalFlushTimeout applies after SIGTERM/SIGINT.
	SignalFlushTimeout = 15 * time.Second
)

// Options holds the parts of an Agent that tests replace. Zero values use
// the production defaults.
type Options struct {
	// HostEnv is the environment steps may inherit allowlisted vars from
	// (os.Environ() when nil).
	HostEnv []string
	// HeartbeatInterval overrides the 30 s connection heartbeat.
	HeartbeatInterval time.Duration
	// Backoff overrides the reconnect backoff.
	Backoff func(n int) time.Duration
	// StepTimeoutGrace overrides the 5 s SIGTERM→SIGKILL window after a
	// step timeout.
	StepTimeoutGrace time.Duration
	// Supervisor is the step supervisor command prefix
	// (runner.Options.Supervisor).
	Supervisor []string
	// AgentBinary is kici-agent's own executable
	// (runner.Options.AgentBinary, the container reaper).
	AgentBinary string
	// Confinement is how steps are kept from the host (confine.go); nil
	// runs them as the agent's user without refusing anything.
	Confinement *Confinement
	// Registered, when set, is called once, after the first register.ack
	// (start-up is over and the agent waits for work), on the connection's
	// goroutine before it sends anything: it must return quickly.
	// kici-agent releases its start-up pages there (package startpages).
	Registered func()
	// IdleTrimAfter is how long a static agent waits, idle after a job,
	// before it hands the heap that job left free back to the operating
	// system (one forced collection, debug.FreeOSMemory); default
	// DefaultIdleTrimAfter, negative never. A job's log buffers and
	// decoded frames would otherwise keep the idle agent's anonymous
	// memory at two to three times its figure before the first job, for
	// as long as the runtime's background scavenger takes.
	IdleTrimAfter time.Duration
}

// DefaultIdleTrimAfter is Options.IdleTrimAfter's default: long enough
// that an agent fed back to back never pays the collection between jobs.
const DefaultIdleTrimAfter = 5 * time.Second

// Agent is a running kici-agent: one connection, at most one job at a time.
type Agent struct {
	cfg    *Config
	log    *slog.Logger
	client *conn.Client
	runner *runner.Runner

	mu      sync.Mutex
	current *protocol.JobDispatch
	// unreported holds finished jobs whose terminal job.status has not
	// been written to the socket yet; they stay in inFlightJobs so a
	// reconnect does not look like a lost job.
	unreported map[string]protocol.InFlightJob
	draining   bool
	jobsRun    int
	idle       *time.Timer
	jobCtx     context.Context
	cancelJob  context.CancelFunc
	jobDone    chan struct{}
	attests    attestWaiters // provenance.attest round trips (attest.go)
	idleFired  chan struct{}
	wg         sync.WaitGroup
	registered sync.Once
	onFirstAck func()
	// trimAfter is Options.IdleTrimAfter resolved; idleTrim is its armed
	// timer (guarded by mu).
	trimAfter time.Duration
	idleTrim  *time.Timer

	// recent holds the terminal job.status of jobs finished within
	// RecentStatusReplayWindow; they are listed in inFlightJobs and sent
	// again after every re-registration, because a frame written to a
	// socket whose orchestrator died before reading it is lost (the
	// orchestrator applies replays idempotently). Guarded by mu.
	recent map[string]recentStatus
	// drainReq is signalled by Drain; drainRequested (guarded by mu)
	// stays set.
	drainReq       chan struct{}
	drainRequested bool
	// resume is the session resume token of the last register.ack, sent
	// back on every re-registration (guarded by mu; never logged).
	resume string
	// statusAcks: the last register.ack negotiated job.status.ack (guarded
	// by mu); statusAcked is signalled on each ack (statusack.go).
	statusAcks  bool
	statusAcked chan struct{}
}

// New returns an Agent for cfg. logger may be nil.
func New(cfg *Config, logger *slog.Logger, opts Options) *Agent {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.HostEnv == nil {
		opts.HostEnv = os.Environ()
	}
	a := &Agent{cfg: cfg, log: logger, jobDone: make(chan struct{}, 1), idleFired: make(chan struct{}, 1), unreported: map[string]protocol.InFlightJob{}}
	a.drainReq = make(chan struct{}, 1)
	a.statusAcked = make(chan struct{}, 1)
	a.recent = map[string]recentStatus{}
	a.jobCtx, a.cancelJob = context.WithCancel(context.Background())
	a.onFirstAck = opts.Registered
	a.trimAfter = opts.IdleTrimAfter
	if a.trimAfter == 0 {
		a.trimAfter = DefaultIdleTrimAfter
	}
	a.client = conn.New(conn.Options{
		URL:               cfg.OrchestratorURL,
		URLs:              cfg.OrchestratorURLs,
		Token:             cfg.Token,
		Register:          a.registerFrame,
		OnRegistered:      a.onRegistered,
		OnMessage:         a.onMessage,
		OnWritten:         a.onWritten,
		HeartbeatInterval: opts.HeartbeatInterval,
		SpillDir:          cfg.WorkDir,
		Backoff:           opts.Backoff,
		Logger:            logger,
	})
	ropts := runner.Options{
		WorkRoot:           cfg.WorkDir,
		HostEnv:            opts.HostEnv,
		DefaultStepTimeout: cfg.DefaultStepTimeout,
		HeartbeatInterval:  cfg.JobHeartbeatInterval,
		MaxLogBytes:        cfg.MaxLogSizeBytes,
		Credentials:        nonEmpty(cfg.Token),
		TimeoutGrace:       opts.StepTimeoutGrace,
		Logger:             logger,
		Attest:             a.attest,
		Blobs:              blobOptions(cfg, a.client.URL),
		Supervisor:         opts.Supervisor,
		AgentBinary:        opts.AgentBinary,
		InPod:              cfg.InPod,
	}
	if c := opts.Confinement; c != nil {
		ropts.StepUser, ropts.UIDs, ropts.RefuseUntrusted = c.StepUser, c.UIDs, c.RefuseUntrusted
	}
	if cfg.InPod && ropts.UIDs != nil {
		ropts.UIDs = podUIDPool(ropts.UIDs, cfg.WorkDir)
	}
	a.runner = runner.New(ropts, emitter{a})
	return a
}

// emitter forwards runner frames to the connection and frees the agent's
// job slot as soon as the terminal job.status is queued, so a dispatch that
// follows the status at once is not rejected as busy.
type emitter struct{ a *Agent }

// Send implements runner.Emitter.
func (e emitter) Send(msg any) {
	if js, ok := msg.(*protocol.JobStatus); ok && js.State != status.JobRunning {
		a := e.a
		a.mu.Lock()
		if a.current != nil && a.current.JobID == js.JobID {
			a.current = nil
			a.jobsRun++
			if a.cfg.ScalerManaged {
				a.draining = true
			}
		}
		a.unreported[js.JobID] = protocol.InFlightJob{JobID: js.JobID, RunID: js.RunID}
		a.recent[js.JobID] = recentStatus{msg: js, at: time.Now()}
		a.mu.Unlock()
	}
	e.a.client.Send(msg)
}

func (a *Agent) onWritten(msg any) {
	if js, ok := msg.(*protocol.JobStatus); ok && js.State != status.JobRunning {
		a.mu.Lock()
		delete(a.unreported, js.JobID)
		a.mu.Unlock()
	}
}

func (a *Agent) registerFrame() *protocol.AgentRegister {
	a.mu.Lock()
	defer a.mu.Unlock()
	reg := &protocol.AgentRegister{
		Type:           protocol.TypeAgentRegister,
		MessageID:      uuid.NewString(),
		AgentID:        a.cfg.AgentID,
		Labels:         a.cfg.AllLabels(),
		Platform:       runtime.GOOS,
		Arch:           runtime.GOARCH,
		Version:        Version,
		Hostname:       a.cfg.Hostname,
		MaxConcurrency: 1,
		ScalerManaged:  a.cfg.ScalerManaged,
		ResumeToken:    a.resume,
		StatusAcks:     true,
	}
	if a.current != nil {
		reg.InFlightJobs = append(reg.InFlightJobs, protocol.InFlightJob{JobID: a.current.JobID, RunID: a.current.RunID})
	}
	for _, j := range a.unreported {
		reg.InFlightJobs = append(reg.InFlightJobs, j)
	}
	a.pruneRecentLocked()
	for id, r := range a.recent {
		if _, listed := a.unreported[id]; !listed {
			reg.InFlightJobs = append(reg.InFlightJobs, protocol.InFlightJob{JobID: id, RunID: r.msg.RunID})
		}
	}
	return reg
}

// RecentStatusReplayWindow is how long a finished job's terminal status is
// replayed after each re-registration.
const RecentStatusReplayWindow = 10 * time.Minute

// recentStatus is a terminal job.status kept for replay.
type recentStatus struct {
	msg *protocol.JobStatus
	at  time.Time
}

// pruneRecentLocked forgets replayable statuses older than the window.
// Caller holds a.mu.
func (a *Agent) pruneRecentLocked() {
	for id, r := range a.recent {
		if time.Since(r.at) > RecentStatusReplayWindow {
			delete(a.recent, id)
		}
	}
}

// replayRecent queues the terminal statuses of recently finished jobs again
// (after a re-registration); the orchestrator ignores those it already has.
func (a *Agent) replayRecent() {
	a.mu.Lock()
	a.pruneRecentLocked()
	var msgs []*protocol.JobStatus
	for _, r := range a.recent {
		cp := *r.msg
		cp.MessageID = uuid.NewString()
		msgs = append(msgs, &cp)
	}
	a.mu.Unlock()
	for _, m := range msgs {
		a.log.Info("replaying terminal job status after reconnect", "jobId", m.JobID, "state", m.State)
		a.client.Send(m)
	}
}

func (a *Agent) onRegistered(ack *protocol.RegisterAck) {
	a.mu.Lock()
	if ack.ResumeToken != "" {
		a.resume = ack.ResumeToken // proves this process on the next reconnect
	}
	a.statusAcks = ack.StatusAcks
	a.mu.Unlock()
	a.replayRecent()
	if a.onFirstAck != nil {
		a.registered.Do(a.onFirstAck)
	}
	if !a.cfg.ScalerManaged {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.current != nil || a.jobsRun > 0 || a.draining {
		return
	}
	wait := a.cfg.ScalerIdleTimeout
	if ack.PendingDispatch {
		wait = a.cfg.ScalerPendingDispatchTimeout
	}
	if a.idle != nil {
		a.idle.Stop()
	}
	a.idle = time.AfterFunc(wait, func() {
		a.mu.Lock()
		fire := a.current == nil && a.jobsRun == 0
		a.mu.Unlock()
		if fire {
			select {
			case a.idleFired <- struct{}{}:
			default:
			}
		}
	})
}

func (a *Agent) onMessage(msg any) {
	switch m := msg.(type) {
	case *protocol.JobDispatch:
		a.onDispatch(m)
	case *protocol.JobCancel:
		a.log.Info("cancel requested", "jobId", m.JobID, "reason", m.Reason, "force", m.Force)
		reason := m.Reason
		if reason == "" {
			reason = "cancelled by the orchestrator"
		}
		a.runner.Cancel(m.JobID, reason, m.Force)
	case *protocol.RegisterAck:
		a.onRegistered(m)
	case *protocol.ProvenanceAttestResult:
		a.onAttestResult(m)
	case *protocol.JobStatusAck:
		a.onStatusAck(m)
	default:
		a.log.Debug("ignoring message", "type", fmt.Sprintf("%T", msg))
	}
}

func (a *Agent) onDispatch(d *protocol.JobDispatch) {
	a.mu.Lock()
	var reason protocol.RejectReason
	switch {
	case a.draining:
		reason = protocol.RejectDraining
	case a.current != nil:
		reason = protocol.RejectBusy
	}
	if reason != "" {
		active := 0
		if a.current != nil {
			active = 1
		}
		a.mu.Unlock()
		a.log.Info("rejecting dispatch", "jobId", d.JobID, "reason", reason)
		a.client.Send(&protocol.JobReject{Type: protocol.TypeJobReject, RunID: d.RunID, JobID: d.JobID, Reason: reason, Timestamp: time.Now().UnixMilli()})
		a.client.Send(&protocol.AgentStatus{Type: protocol.TypeAgentStatus, AgentID: a.cfg.AgentID, ActiveJobs: active, Draining: reason == protocol.RejectDraining})
		return
	}
	a.current = d
	if a.idle != nil {
		a.idle.Stop()
	}
	a.wg.Add(1)
	a.mu.Unlock()

	a.client.Send(&protocol.JobAck{Type: protocol.TypeJobAck, RunID: d.RunID, JobID: d.JobID, Timestamp: time.Now().UnixMilli()})
	a.log.Info("job accepted", "jobId", d.JobID, "runId", d.RunID, "job", d.JobName)
	go func() {
		defer a.wg.Done()
		res := a.runner.Run(a.jobCtx, d)
		a.log.Info("job finished", "jobId", d.JobID, "state", res.State, "error", res.Error, "duration", res.Duration.Round(time.Millisecond))
		a.mu.Lock()
		if a.current != nil && a.current.JobID == d.JobID {
			// Run always sends a terminal status; this is a safety net.
			a.current = nil
			a.jobsRun++
			if a.cfg.ScalerManaged {
				a.draining = true
			}
		}
		draining := a.draining
		if !a.cfg.ScalerManaged && !draining {
			a.armIdleTrimLocked()
		}
		a.mu.Unlock()
		a.client.Send(&protocol.AgentStatus{Type: protocol.TypeAgentStatus, AgentID: a.cfg.AgentID, ActiveJobs: 0, Draining: draining})
		select {
		case a.jobDone <- struct{}{}:
		default:
		}
	}()
}

// armIdleTrimLocked (a.mu held) arms the idle trim for the job that just
// ended: it runs after trimAfter only if no job started or ended since.
func (a *Agent) armIdleTrimLocked() {
	if a.trimAfter < 0 {
		return
	}
	if a.idleTrim != nil {
		a.idleTrim.Stop()
	}
	ended := a.jobsRun
	a.idleTrim = time.AfterFunc(a.trimAfter, func() {
		a.mu.Lock()
		idle := a.current == nil && a.jobsRun == ended
		a.mu.Unlock()
		if idle {
			debug.FreeOSMemory()
			a.log.Debug("idle after a job: returned free heap to the operating system")
		}
	})
}

// Drain puts the agent in drain mode (KiCI SIGUSR1): it
// takes no new job (dispatches get job.reject "draining"), tells the
// orchestrator with agent.status, lets the running job finish normally and
// then makes Run return nil after flushing. Safe to call more than once.
func (a *Agent) Drain() {
	a.mu.Lock()
	a.draining = true
	a.drainRequested = true
	active := 0
	if a.current != nil {
		active = 1
	}
	a.mu.Unlock()
	a.log.Info("draining: finishing the running job, taking no new work", "activeJobs", active)
	a.client.Send(&protocol.AgentStatus{Type: protocol.TypeAgentStatus, AgentID: a.cfg.AgentID, ActiveJobs: active, Draining: true})
	select {
	case a.drainReq <- struct{}{}:
	default:
	}
}

// ForceStop SIGKILLs the running job at once (a second SIGTERM/SIGINT).
func (a *Agent) ForceStop() {
	a.mu.Lock()
	cur := a.current
	a.draining = true
	a.mu.Unlock()
	if cur != nil {
		a.runner.Cancel(cur.JobID, "agent shutting down", true)
	}
}

// Run connects and serves until ctx is cancelled (graceful shutdown: stop
// taking work, cancel the running job with SIGTERM → grace → SIGKILL, report
// it, flush, close with 1000, return nil), until a scaler-managed agent has
// run its one job or timed out waiting for it (nil), or until the
// orchestrator refuses the credentials (an error wrapping conn.ErrAuthFailed;
// no reconnect).
func (a *Agent) Run(ctx context.Context) error {
	clientCtx, cancelClient := context.WithCancel(context.Background())
	defer cancelClient()
	defer func() {
		a.mu.Lock()
		if a.idleTrim != nil {
			a.idleTrim.Stop()
		}
		a.mu.Unlock()
	}()
	a.log.Info("agent starting", "agentId", a.cfg.AgentID, "urls", a.cfg.OrchestratorURLs, "labels", a.cfg.AllLabels(), "scalerManaged", a.cfg.ScalerManaged, "version", Version)
	// What crashed jobs left in the work root is taken back in the
	// background: connecting (a spawned agent's job) does not wait for it.
	go func() {
		if remove := a.runner.SweepWorkRoot(); remove != nil {
			remove()
		}
	}()
	clientErr := make(chan error, 1)
	go func() { clientErr <- a.client.Run(clientCtx) }()

	var flushTimeout time.Duration
	for flushTimeout == 0 {
		select {
		case err := <-clientErr:
			// Permanent failure (credentials) or an unexpected end.
			a.ForceStop()
			a.cancelJob()
			a.wg.Wait()
			if err == nil {
				err = errors.New("orchestrator connection ended")
			}
			return fmt.Errorf("agent stopped: %w", err)
		case <-ctx.Done():
			a.log.Info("shutdown requested; cancelling the running job if any")
			a.mu.Lock()
			a.draining = true
			if a.idle != nil {
				a.idle.Stop()
			}
			a.mu.Unlock()
			a.cancelJob()
			a.wg.Wait()
			flushTimeout = SignalFlushTimeout
		case <-a.jobDone:
			a.mu.Lock()
			drained := a.drainRequested
			a.mu.Unlock()
			if a.cfg.ScalerManaged || drained {
				a.wg.Wait()
				a.log.Info("agent finished its job and is draining or single-use; exiting")
				flushTimeout = JobDoneFlushTimeout
			}
		case <-a.drainReq:
			a.mu.Lock()
			idle := a.current == nil
			a.mu.Unlock()
			if idle {
				a.wg.Wait()
				a.log.Info("drained: no job running; exiting")
				flushTimeout = SignalFlushTimeout
			}
		case <-a.idleFired:
			a.mu.Lock()
			if a.current != nil || a.jobsRun > 0 {
				a.mu.Unlock()
				continue
			}
			a.draining = true
			a.mu.Unlock()
			a.log.Info("no dispatch arrived; scaler-managed agent exiting")
			flushTimeout = JobDoneFlushTimeout
		}
	}

	// Statuses first: an unacknowledged one is sent again to the node the
	// agent reconnects to, which needs the connection still running.
	deadline := time.Now().Add(flushTimeout)
	a.awaitStatusAcks(flushTimeout)
	a.client.Close()
	t := time.NewTimer(max(time.Until(deadline), time.Second))
	defer t.Stop()
	select {
	case err := <-clientErr:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("agent stopped: %w", err)
		}
	case <-t.C:
		a.log.Warn("could not deliver every queued frame before exiting", "pending", a.client.Pending())
		cancelClient()
		<-clientErr
	}
	return nil
}

// nonEmpty returns the non-empty values.
func nonEmpty(vals ...string) []string {
	var out []string
	for _, v := range vals {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// podUIDPool is p with its lock files in the work root: the agent is the
// only one of its pod, so no other agent shares the uids, and a job's image
// may have no writable /run (runner.DefaultUIDLockDir) while the work root
// is the pod's own volume.
func podUIDPool(p *runner.UIDPool, workDir string) *runner.UIDPool {
	if workDir == "" {
		workDir = os.TempDir()
	}
	q := *p
	q.LockDir = filepath.Join(workDir, ".kici-step-uids")
	return &q
}
