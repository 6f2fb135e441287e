// Package scaler is kici's auto-scaler (KiCI's ScalerManager and backends;
// see docs/kici-compatibility.md#scaling): scalers.yaml,
// the Manager that matches queued jobs to scalers and reserves capacity,
// and the backends that start single-use agents: BareMetal (processes on
// this host) and Container (Docker Engine).
package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BareMetalOptions configure the bare-metal backend.
type BareMetalOptions struct {
	// AgentBinary is the kici-agent executable for label sets without
	// binaryPath.
	AgentBinary string
	// WorkDir is passed to agents as KICI_WORK_DIR and is their working
	// directory; created with mode 0700 if missing, refused when it is
	// not owned by this user or is group/world-writable (EnsurePrivateDir).
	// The orchestrator uses DefaultWorkDir unless KICI_WORK_DIR is set.
	WorkDir string
	// HidePaths are passed to agents as KICI_AGENT_HIDE_PATHS: what a
	// non-root agent hides from its steps (the orchestrator's data
	// directory).
	HidePaths []string
	// LogDir receives <LogDir>/<agentId>.log with each agent's output.
	LogDir string
	// Environ is the base environment to filter and pass on (default
	// os.Environ()).
	Environ []string
	// TLSCAFile is given to each agent as KICI_TLS_CA_FILE: the PEM CA
	// certificates it trusts when the orchestrator serves wss:// ("" none).
	TLSCAFile string
	// StopGrace is the SIGTERM→SIGKILL delay on destroy (default 5 s).
	StopGrace time.Duration
	// Logger logs starts and exits.
	Logger *slog.Logger
	// CgroupProbe reports whether `systemd-run --user --scope` works here
	// (default: runs `systemd-run --user --scope --quiet true` once).
	CgroupProbe func() error
}

// BareMetal runs agents as processes on the orchestrator's host (KiCI
// bare-metal backend): each agent leads its own process group, gets
// the filtered orchestrator environment, and is stopped with SIGTERM to
// the group, then SIGKILL after StopGrace. With enforceCgroups the agent
// runs under `systemd-run --user --scope` with CPUQuota and MemoryMax from
// its limits, when a user systemd is reachable; otherwise the limits only
// drive accounting and the job's provisioning log says so.
type BareMetal struct {
	opts   BareMetalOptions
	exited func(agentID string, err error)
	log    *slog.Logger

	mu     sync.Mutex
	procs  map[string]*proc
	closed bool

	probeOnce sync.Once
	probeErr  error
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	// released: handed over (Release); its exit is not reported and its
	// pid file stays for the node's next start.
	released bool
}

// NewBareMetal returns a bare-metal backend; exited is called once per
// agent process after it ended (with its wait error).
func NewBareMetal(opts BareMetalOptions, exited func(agentID string, err error)) *BareMetal {
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CgroupProbe == nil {
		opts.CgroupProbe = probeSystemdRun
	}
	return &BareMetal{opts: opts, exited: exited, log: opts.Logger, procs: map[string]*proc{}}
}

func probeSystemdRun() error {
	path, err := exec.LookPath("systemd-run")
	if err != nil {
		return errors.New("systemd-run not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--user", "--scope", "--quiet", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemd-run --user --scope failed: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// cgroupArgv is the systemd-run prefix for limits (KiCI): CPUQuota is
// round(cpus×100)% (at least 1 %), MemoryMax is in bytes.
func cgroupArgv(agentID string, l Limits) []string {
	argv := []string{"systemd-run", "--user", "--scope", "--quiet", "--slice=kici-scaler", "--unit=kici-agent-" + agentID}
	if l.NanoCPUs > 0 {
		q := max(int64(math.Round(float64(l.NanoCPUs)/1e7)), 1)
		argv = append(argv, "--property=CPUQuota="+strconv.FormatInt(q, 10)+"%")
	}
	if l.MemoryBytes > 0 {
		argv = append(argv, "--property=MemoryMax="+strconv.FormatInt(l.MemoryBytes, 10))
	}
	return append(argv, "--")
}

// Spawn starts the agent process. Errors: shutting down, ctx ended, log
// or work directory, exec failure.
func (b *BareMetal) Spawn(ctx context.Context, req *SpawnRequest) error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return errors.New("backend is shutting down")
	}
	local := *req
	local.OrchestratorURL = agentURL(req.OrchestratorURL, "127.0.0.1")
	req = &local
	if b.opts.LogDir != "" {
		if err := os.MkdirAll(b.opts.LogDir, 0o700); err != nil {
			return err
		}
	}
	if b.opts.WorkDir != "" {
		if err := EnsurePrivateDir(b.opts.WorkDir); err != nil {
			return fmt.Errorf("work directory: %w", err)
		}
	}
	bin := req.LabelSet.BinaryPath
	if bin == "" {
		bin = b.opts.AgentBinary
	}
	argv := []string{bin}
	if req.Entry.EnforceCgroups && (req.Limits.NanoCPUs > 0 || req.Limits.MemoryBytes > 0) {
		b.probeOnce.Do(func() { b.probeErr = b.opts.CgroupProbe() })
		if b.probeErr != nil {
			// Why is a host matter (systemd, D-Bus paths): the job
			// learns that, the orchestrator's log why.
			b.log.Warn("cgroup limits not enforced", "agent", req.AgentID, "job", req.JobID, "err", b.probeErr)
			req.Emit(EventProvisioning, "cgroup limits not enforced on this host (the orchestrator's log says why)")
		} else {
			argv = append(cgroupArgv(req.AgentID, req.Limits), bin)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	logPath := filepath.Join(b.opts.LogDir, req.AgentID+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	env := hostEnv(b.opts.Environ)
	if b.opts.WorkDir != "" {
		env = append(env, "KICI_WORK_DIR="+b.opts.WorkDir)
	}
	env = append(env, confinementVars(b.opts.Environ)...)
	if b.opts.TLSCAFile != "" {
		env = append(env, "KICI_TLS_CA_FILE="+b.opts.TLSCAFile)
	}
	if len(b.opts.HidePaths) > 0 {
		env = append(env, "KICI_AGENT_HIDE_PATHS="+strings.Join(b.opts.HidePaths, ":"))
	}
	// The token goes through an inherited pipe, not the environment: a
	// step can read its agent's /proc/<pid>/environ, which keeps the
	// initial environment for the life of the process.
	var tokenR *os.File
	for _, kv := range agentVars(req, b.opts.Environ) {
		if strings.HasPrefix(kv, "KICI_AGENT_TOKEN=") {
			continue
		}
		env = append(env, kv)
	}
	if req.Token != "" {
		r, err := tokenPipe(req.Token)
		if err != nil {
			f.Close()
			return fmt.Errorf("agent token pipe: %w", err)
		}
		tokenR = r
		cmd.ExtraFiles = []*os.File{r} // descriptor 3 in the agent
		env = append(env, "KICI_AGENT_TOKEN_FD=3")
	}
	cmd.Env = env
	cmd.Dir = b.opts.WorkDir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	if tokenR != nil {
		tokenR.Close() // the agent holds its own copy
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	b.procs[req.AgentID] = pr
	b.mu.Unlock()
	b.writePidFile(req.AgentID, cmd.Process.Pid) // lost.go
	// Process id, command line and log path stay on the orchestrator's
	// log: the job's log is read by whoever can read the run.
	b.log.Info("agent process started", "agent", req.AgentID, "job", req.JobID, "pid", cmd.Process.Pid, "argv", strings.Join(argv, " "), "log", logPath)
	req.Emit(EventProvisioning, fmt.Sprintf("agent %s started as a process on the orchestrator's host", req.AgentID))
	go func() {
		err := cmd.Wait()
		f.Close()
		if b.opts.LogDir != "" {
			_ = os.Remove(b.pidFile(req.AgentID))
		}
		// Steps the agent left behind die with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		b.mu.Lock()
		if b.procs[req.AgentID] == pr {
			delete(b.procs, req.AgentID)
		}
		released := pr.released
		b.mu.Unlock()
		if released {
			b.log.Info("handed-over agent process exited", "agent", req.AgentID, "err", err)
			close(pr.done)
			return
		}
		b.log.Info("agent process exited", "agent", req.AgentID, "err", err)
		if b.exited != nil {
			b.exited(req.AgentID, err)
		}
		close(pr.done) // after the report: Destroy returns with the exit known
	}()
	return nil
}

// Destroy sends SIGTERM to the agent's process group and SIGKILL after
// StopGrace; it returns when the process has ended or ctx ends.
func (b *BareMetal) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	pr := b.procs[id]
	b.mu.Unlock()
	if pr == nil {
		return nil
	}
	b.terminate([]*proc{pr}, ctx)
	return nil
}

func (b *BareMetal) terminate(procs []*proc, ctx context.Context) {
	for _, pr := range procs {
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGTERM)
	}
	grace := time.NewTimer(b.opts.StopGrace)
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

// Release lets go of a running agent process (HandOver): Shutdown no
// longer terminates it and its exit is not reported. It reports false for
// an unknown id.
func (b *BareMetal) Release(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	pr := b.procs[id]
	if pr == nil {
		return false
	}
	if why := diesWithOrchestrator(pr.cmd.Process.Pid); why != "" {
		b.log.Warn("agent process not handed over: it would be killed with the orchestrator; it is stopped and cancels its job", "agent", id, "why", why)
		return false
	}
	pr.released = true
	delete(b.procs, id)
	b.log.Info("agent process handed over: it keeps running its job and reconnects to another node", "agent", id, "pid", pr.cmd.Process.Pid)
	return true
}

// Shutdown refuses further spawns and terminates every agent (SIGTERM,
// StopGrace, SIGKILL), waiting for them to be reaped (bounded by ctx).
func (b *BareMetal) Shutdown(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	procs := make([]*proc, 0, len(b.procs))
	for _, pr := range b.procs {
		procs = append(procs, pr)
	}
	b.mu.Unlock()
	b.terminate(procs, ctx)
}

// Active returns the number of running agent processes.
func (b *BareMetal) Active() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.procs)
}

// tokenPipe returns the read end of a pipe that holds token and is
// already closed for writing, so the reader sees the token then EOF. A
// token is far below the pipe buffer (64 KiB on Linux), so the write never
// blocks.
func tokenPipe(token string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.WriteString(token)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// DefaultWorkDir is the default parent of bare-metal agents' work
// directories: <os temp dir>/kici-work-<uid>. It is outside the
// orchestrator's data directory on purpose: a step must not find the
// database, the admin token or the master key relative to its working
// directory.
func DefaultWorkDir() string {
	return filepath.Join(os.TempDir(), "kici-work-"+strconv.Itoa(os.Getuid()))
}

// EnsurePrivateDir creates dir with mode 0700 when missing (its parents
// with 0755) and checks that what is there is safe to use: a real
// directory (not a symlink), owned by the current user, not writable by
// group or others. A pre-existing directory that fails a check is refused,
// not repaired: in a shared temp directory another user may have created
// it first to watch or tamper with jobs.
func EnsurePrivateDir(dir string) error {
	if dir == "" {
		return errors.New("empty directory name")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (symlinks are refused)", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d); remove it or choose another directory", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s has mode %04o: writable by group or others; make it 0700 or choose another directory", dir, perm)
	}
	return nil
}

// serverOnlyVars never reach an agent, whatever their prefix rules say.
var serverOnlyVars = []string{"KICI_BOOTSTRAP_ADMIN_TOKEN", "KICI_DATABASE_URL", "KICI_SECRET_KEY", "KICI_SECRET_KEY_FILE"}

// secretMarkers flag variable names that look like credentials.
var secretMarkers = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY", "API_KEY", "CREDENTIAL", "DATABASE_URL"}

// hostEnv is base (default os.Environ()) without KICI_* variables and
// credential-looking names (KICI_LOG_LEVEL is kept).
func hostEnv(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	var env []string
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		upper := strings.ToUpper(k)
		if k == "KICI_LOG_LEVEL" || k == "KICI_AGENT_JOB_HOME" {
			env = append(env, kv)
			continue
		}
		if strings.HasPrefix(upper, "KICI_") || slices.Contains(serverOnlyVars, upper) || looksSecret(upper) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// forwardedEnv is KICI_AGENT_ENV_<X>=v from base as X=v (KiCI), skipping
// KICI_* and credential-looking names.
func forwardedEnv(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	var out []string
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if fk, isFwd := strings.CutPrefix(k, "KICI_AGENT_ENV_"); isFwd && fk != "" &&
			!strings.HasPrefix(strings.ToUpper(fk), "KICI_") && !looksSecret(strings.ToUpper(fk)) {
			out = append(out, fk+"="+v)
		}
	}
	return out
}

// agentVars are the variables every spawned agent gets, after the
// forwarded ones: the label set's env, then the scaler's own settings
// (KiCI Env).
func agentVars(req *SpawnRequest, base []string) []string {
	env := forwardedEnv(base)
	keys := make([]string, 0, len(req.LabelSet.Env))
	for k := range req.LabelSet.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+req.LabelSet.Env[k])
	}
	if req.Warm {
		// A pool agent waits for a job as long as the pool keeps it; the
		// warm-pool reaper, not the agent, decides when it goes.
		env = append(env, "KICI_SCALER_IDLE_TIMEOUT="+warmAgentIdleTimeoutMs)
	}
	// The orchestrator's log format: a spawned agent's log (its file under
	// <data>/agents, or the container's output) reads like the
	// orchestrator's, JSON for a log collector with KICI_LOG_FORMAT=json.
	if base == nil {
		base = os.Environ()
	}
	for _, kv := range base {
		if strings.HasPrefix(kv, "KICI_LOG_FORMAT=") {
			env = append(env, kv)
		}
	}
	return append(env,
		"KICI_ORCHESTRATOR_URL="+req.OrchestratorURL,
		"KICI_AGENT_ID="+req.AgentID,
		"KICI_AGENT_TOKEN="+req.Token,
		"KICI_LABELS="+strings.Join(req.LabelSet.Labels, ","),
		"KICI_SCALER_MANAGED=true",
	)
}

// AgentEnv is the environment of a spawned agent (NAME=value) without its
// token: the forwarded KICI_AGENT_ENV_* values, the label set's env, then
// the scaler's own settings, as every backend sets them. A backend that
// delivers the token another way (a file, standard input) starts from it.
func AgentEnv(req *SpawnRequest) []string {
	var env []string
	for _, kv := range agentVars(req, nil) {
		if !strings.HasPrefix(kv, "KICI_AGENT_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// warmAgentIdleTimeoutMs is the agent-side idle timeout of warm agents
// (ten years: effectively never).
const warmAgentIdleTimeoutMs = "315360000000"

func looksSecret(upperName string) bool {
	for _, m := range secretMarkers {
		if strings.Contains(upperName, m) {
			return true
		}
	}
	return false
}

// BackendOptions are the host-side settings every backend needs.
type BackendOptions struct {
	// BareMetal configures bare-metal scalers (its Logger is shared).
	BareMetal BareMetalOptions
	// Container configures container scalers.
	Container ContainerOptions
}

// Backends returns the factory building each entry's backend by type.
func Backends(o BackendOptions) BackendFactory {
	return func(e *Entry, exited func(agentID string, err error)) (Backend, error) {
		switch e.Type {
		case TypeBareMetal:
			bo := o.BareMetal
			if bo.Logger != nil {
				bo.Logger = bo.Logger.With("scaler", e.Name)
			}
			return NewBareMetal(bo, exited), nil
		case TypeContainer:
			return NewContainer(e, o.Container, exited)
		}
		return nil, fmt.Errorf("unsupported scaler type %q", e.Type)
	}
}
