// Package scaler starts agents on demand. Process, the embedded default
// backend, runs kici-agent processes on the orchestrator's own host
// (KiCI bare-metal backend, reference kici-scaling-cluster-provenance-ingress.md
// §1.8 and §2.2): one single-use agent per job, each in its own process
// group, authenticated by an ephemeral token bound to its agent id.
package scaler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"kici.dev/kici/internal/protocol"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/dispatch"
)

// ErrAtCapacity is dispatch.ErrAtCapacity: Spawn wraps it when MaxAgents
// agents are already running. The sentinel is defined by dispatch (which
// must not import scaler) and re-exported here for callers of this package.
var ErrAtCapacity = dispatch.ErrAtCapacity

// AgentIDPrefix starts the id of every agent this backend spawns.
const AgentIDPrefix = "kici-local-"

// ProcessConfig configures the process backend.
type ProcessConfig struct {
	// AgentBinary is the path of the kici-agent executable.
	AgentBinary string
	// OrchestratorURL is the agent WebSocket URL, ws://127.0.0.1:<port>/ws.
	OrchestratorURL string
	// MaxAgents caps concurrently running agents (default 4,
	// KICI_MAX_AGENTS).
	MaxAgents int
	// TokenTTL is the lifetime of each agent's ephemeral token (default 1 h,
	// KICI_AGENT_TOKEN_TTL_MS).
	TokenTTL time.Duration
	// WorkDir is passed to agents as KICI_WORK_DIR (parent of per-job work
	// directories) and is their working directory; created if missing.
	WorkDir string
	// LogDir receives one file per spawned agent, <LogDir>/<agentId>.log,
	// with its stdout and stderr; created if missing.
	LogDir string
	// Hostname overrides os.Hostname for the kici:host label CanServe
	// expects (tests); the agent computes its own label the same way.
	Hostname string
	// Environ is the base environment to filter and pass on (default
	// os.Environ()).
	Environ []string
}

// Process spawns kici-agent processes; it implements dispatch.Spawner and
// dispatch.SpawnStopper. Safe for concurrent use.
type Process struct {
	cfg    ProcessConfig
	auth   *auth.AgentAuth
	log    *slog.Logger
	labels []string

	mu       sync.Mutex
	procs    map[string]*proc
	starting int
	closed   bool
	onExit   func(agentID string, err error)
}

type proc struct {
	cmd   *exec.Cmd
	jobID string
	done  chan struct{}
}

// NewProcess returns a process backend. Nothing is started until Spawn.
func NewProcess(cfg ProcessConfig, agentAuth *auth.AgentAuth, logger *slog.Logger) *Process {
	if cfg.MaxAgents <= 0 {
		cfg.MaxAgents = 4
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = time.Hour
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
		if cfg.Hostname == "" {
			cfg.Hostname = "localhost"
		}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Process{
		cfg: cfg, auth: agentAuth, log: logger,
		labels: protocol.AutoLabels(runtime.GOOS, runtime.GOARCH, cfg.Hostname),
		procs:  map[string]*proc{},
	}
}

// OnExit registers fn, called (from the reaping goroutine) after a spawned
// agent process exited, with its wait error (nil for exit status 0). Set it
// before the first Spawn; the orchestrator wires Dispatcher.AgentExited.
func (p *Process) OnExit(fn func(agentID string, err error)) {
	p.mu.Lock()
	p.onExit = fn
	p.mu.Unlock()
}

// Labels returns the labels spawned agents register with.
func (p *Process) Labels() []string { return append([]string{}, p.labels...) }

// CanServe reports whether every label is one of the auto labels a spawned
// agent carries (spawned agents get no user labels).
func (p *Process) CanServe(labels []string) bool {
	for _, l := range labels {
		if !slices.Contains(p.labels, l) {
			return false
		}
	}
	return true
}

// Active returns the number of running (or starting) agents.
func (p *Process) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.procs) + p.starting
}

// Spawn starts one single-use agent for jobID and returns its id
// ("kici-local-<8 hex>"). The agent gets an ephemeral token bound to that
// id, KICI_SCALER_MANAGED=true, its own process group, and its output in
// <LogDir>/<agentId>.log. Errors: an error wrapping ErrAtCapacity
// ("scaler at capacity (N/N agents)") when MaxAgents are running; token,
// file or exec failures otherwise.
func (p *Process) Spawn(ctx context.Context, jobID string) (string, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return "", errors.New("scaler is shutting down")
	}
	if n := len(p.procs) + p.starting; n >= p.cfg.MaxAgents {
		p.mu.Unlock()
		return "", fmt.Errorf("%w (%d/%d agents)", ErrAtCapacity, n, p.cfg.MaxAgents)
	}
	p.starting++
	p.mu.Unlock()
	started := false
	defer func() {
		if !started {
			p.mu.Lock()
			p.starting--
			p.mu.Unlock()
		}
	}()

	var b [4]byte
	_, _ = rand.Read(b[:])
	id := AgentIDPrefix + hex.EncodeToString(b[:])
	token, err := p.auth.IssueEphemeral(ctx, id, p.cfg.TokenTTL)
	if err != nil {
		return "", err
	}
	for _, dir := range []string{p.cfg.LogDir, p.cfg.WorkDir} {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return "", fmt.Errorf("scaler: %w", err)
			}
		}
	}
	logPath := filepath.Join(p.cfg.LogDir, id+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("scaler: agent log: %w", err)
	}
	cmd := exec.Command(p.cfg.AgentBinary)
	cmd.Env = p.agentEnv(id, token)
	cmd.Dir = p.cfg.WorkDir
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return "", fmt.Errorf("scaler: start %s: %w", p.cfg.AgentBinary, err)
	}
	pr := &proc{cmd: cmd, jobID: jobID, done: make(chan struct{})}
	p.mu.Lock()
	p.starting--
	started = true
	p.procs[id] = pr
	p.mu.Unlock()
	p.log.Info("agent process started", "agent", id, "job", jobID, "pid", cmd.Process.Pid, "log", logPath)

	go func() {
		err := cmd.Wait()
		f.Close()
		// Steps the agent left behind die with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		p.mu.Lock()
		delete(p.procs, id)
		fn := p.onExit
		p.mu.Unlock()
		close(pr.done)
		p.log.Info("agent process exited", "agent", id, "err", err)
		if fn != nil {
			fn(id, err)
		}
	}()
	return id, nil
}

// serverOnlyVars never reach an agent, whatever their prefix rules say.
var serverOnlyVars = []string{"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_DATABASE_URL", "KICI_SECRET_KEY", "KICI_SECRET_KEY_FILE"}

// secretMarkers flag variable names that look like credentials.
var secretMarkers = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY", "API_KEY", "CREDENTIAL", "DATABASE_URL"}

// agentEnv is the orchestrator's environment without KICI_* variables and
// credential-looking names, plus KICI_AGENT_ENV_<X>=v forwarded as X=v
// (KiCI), plus the agent's own settings.
func (p *Process) agentEnv(agentID, token string) []string {
	base := p.cfg.Environ
	if base == nil {
		base = os.Environ()
	}
	var env []string
	var forwarded []string
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		upper := strings.ToUpper(k)
		if fk, isFwd := strings.CutPrefix(k, "KICI_AGENT_ENV_"); isFwd {
			if fk != "" && !strings.HasPrefix(strings.ToUpper(fk), "KICI_") && !looksSecret(strings.ToUpper(fk)) {
				forwarded = append(forwarded, fk+"="+v)
			}
			continue
		}
		if k == "KICI_LOG_LEVEL" {
			env = append(env, kv)
			continue
		}
		if strings.HasPrefix(upper, "KICI_") || slices.Contains(serverOnlyVars, upper) || looksSecret(upper) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, forwarded...)
	env = append(env,
		"KICI_ORCHESTRATOR_URL="+p.cfg.OrchestratorURL,
		"KICI_AGENT_ID="+agentID,
		"KICI_AGENT_TOKEN="+token,
		"KICI_SCALER_MANAGED=true",
	)
	if p.cfg.WorkDir != "" {
		env = append(env, "KICI_WORK_DIR="+p.cfg.WorkDir)
	}
	return env
}

func looksSecret(upperName string) bool {
	for _, m := range secretMarkers {
		if strings.Contains(upperName, m) {
			return true
		}
	}
	return false
}

// Stop terminates agent agentID's process group: SIGTERM, then SIGKILL
// after 5 s. Unknown ids are ignored. It does not wait.
func (p *Process) Stop(agentID string) {
	p.mu.Lock()
	pr := p.procs[agentID]
	p.mu.Unlock()
	if pr == nil {
		return
	}
	pgid := pr.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-pr.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
}

// Shutdown refuses further spawns, sends SIGTERM to every agent's process
// group, waits up to 5 s (or until ctx ends) for them to exit, then sends
// SIGKILL to every group and waits for the processes to be reaped (bounded
// by ctx).
func (p *Process) Shutdown(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	procs := make([]*proc, 0, len(p.procs))
	for _, pr := range p.procs {
		procs = append(procs, pr)
	}
	p.mu.Unlock()
	for _, pr := range procs {
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGTERM)
	}
	grace := time.NewTimer(5 * time.Second)
	defer grace.Stop()
	waitAll := func(stop <-chan time.Time) {
		for _, pr := range procs {
			select {
			case <-pr.done:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}
	waitAll(grace.C)
	for _, pr := range procs {
		// The leader may be gone while children it left in the group live on.
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
	}
	waitAll(nil)
}
