// Package agent is the kici-agent runtime: configuration from the
// environment, the connection to the orchestrator, dispatch handling
// (ack/reject), the job runner and the scaler-managed one-job lifecycle
// (see docs/kici-compatibility.md#agent).
//
// Subpackages each do one job: conn (WebSocket client and outbox), runner
// (job execution), checkout (git), logstream (log batching and masking),
// envbuild (step environment).
package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/protocol"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is the agent version reported at registration; set at build time
// with -ldflags "-X kici.dev/kici/internal/agent.Version=…".
var Version = "dev"

// Config is the agent configuration (KiCI variable names).
type Config struct {
	// OrchestratorURL is the ws:// or wss:// URL of the orchestrator's /ws
	// (the first of OrchestratorURLs).
	OrchestratorURL string
	// OrchestratorURLs are the URLs of KICI_ORCHESTRATOR_URL, a
	// comma-separated list: the agent dials them in turn, moving to the
	// next after a failed dial or a lost connection (several orchestrators
	// on one database, docs/high-availability.md).
	OrchestratorURLs []string
	// AgentID identifies the agent (default "<hostname>-<8 hex>").
	AgentID string
	// Token is the agent token (empty ⇒ no auth.request).
	Token string
	// Labels are the user labels (without the automatic kici:* labels).
	Labels []string
	// MaxLogSizeBytes caps each step's log unless the dispatch sets a cap.
	MaxLogSizeBytes int64
	// DefaultStepTimeout applies to steps without a timeout.
	DefaultStepTimeout time.Duration
	// JobHeartbeatInterval is the job.heartbeat period.
	JobHeartbeatInterval time.Duration
	// ScalerManaged ⇒ run one job, then exit.
	ScalerManaged bool
	// ScalerIdleTimeout is how long a scaler-managed agent waits for its
	// dispatch after registering; ScalerPendingDispatchTimeout replaces it
	// when register.ack says a dispatch is pending.
	ScalerIdleTimeout time.Duration
	// ScalerPendingDispatchTimeout: see ScalerIdleTimeout.
	ScalerPendingDispatchTimeout time.Duration
	// WorkDir is the parent of per-job work directories ("" = os temp).
	WorkDir string
	// Hostname is the host name used for labels and the default id.
	Hostname string
	// JobHome gives each job a fresh HOME in its work directory
	// (KICI_AGENT_JOB_HOME; runner.BlobOptions.JobHome).
	JobHome bool
	// InPod is KICI_AGENT_JOB_CONTAINER=pod: the agent runs in the job's
	// own container of a Kubernetes pod (runner.Options.InPod).
	InPod bool
}

// EnvJobContainer says where a job's `container:` is (kici addition):
// unset, the agent starts it with Docker; "pod" (JobContainerPod), the
// agent already runs inside it, a Kubernetes pod the kubernetes scaler
// made with the job's services as sibling containers.
const EnvJobContainer = "KICI_AGENT_JOB_CONTAINER"

// JobContainerPod is the only value EnvJobContainer accepts.
const JobContainerPod = "pod"

// EnvVar documents one configuration variable.
type EnvVar struct {
	// Name is the variable name.
	Name string
	// Default describes the value used when the variable is unset.
	Default string
	// Help is a one-line description.
	Help string
}

// EnvVars lists the variables LoadConfig reads, for --help.
func EnvVars() []EnvVar {
	return []EnvVar{
		{"KICI_ORCHESTRATOR_URL", "", "required: orchestrator WebSocket URL, e.g. ws://127.0.0.1:4000/ws"},
		{"KICI_AGENT_ID", "<hostname>-<8 hex>", "agent identity; set it on a static agent so that after a restart it reclaims its running job"},
		{"KICI_TLS_CA_FILE", "", "PEM CA certificates trusted besides the system roots for a wss:// orchestrator (private CA, self-signed certificate)"},
		{"KICI_AGENT_TOKEN", "", "agent token (kat_…); unset ⇒ no authentication request"},
		{"KICI_AGENT_TOKEN_FD", "", "descriptor to read the token from to its end: 0 (standard input, the container scaler) or an inherited one ≥ 3, then closed (the bare-metal scaler)"},
		{"KICI_AGENT_TOKEN_FILE", "", "regular file (≤ 4 KiB) to read the token from once at start: the kubernetes scaler's read-only Secret volume"},
		{EnvJobContainer, "", "pod ⇒ the agent runs inside the job's container of a Kubernetes pod: steps run as processes here, services are the pod's sibling containers"},
		{"KICI_LABELS", "", "comma-separated routing labels; the kici: prefix is reserved"},
		{"KICI_MAX_LOG_SIZE_BYTES", "10485760", "per-step log cap in bytes (a dispatch value wins)"},
		{"KICI_DEFAULT_STEP_TIMEOUT_MS", "1800000", "step timeout when a step sets none"},
		{"KICI_JOB_HEARTBEAT_INTERVAL_MS", "60000", "job heartbeat period"},
		{"KICI_SCALER_MANAGED", "false", "true ⇒ run exactly one job, then exit"},
		{"KICI_SCALER_IDLE_TIMEOUT", "5000", "ms a scaler-managed agent waits for a dispatch before exiting"},
		{"KICI_SCALER_PENDING_DISPATCH_TIMEOUT", "60000", "same, when register.ack announces a pending dispatch"},
		{"KICI_WORK_DIR", "os temp dir", "parent of the per-job work directories"},
		{"KICI_LOG_LEVEL", "info", "agent log level: debug, info, warn, error"},
		{"KICI_AGENT_JOB_HOME", "false (always on as root)", "true ⇒ each job gets a fresh HOME in its work directory (no state shared through the home directory; use caches)"},
		{EnvStepUser, "a uid per job (as root)", "account name or uid[:gid] every job's steps run as when the agent runs as root (kici-step is created on demand); root keeps them as root"},
		{EnvStepUIDRange, runner.DefaultUIDRange, "range each job's own uid is taken from when the agent runs as root and " + EnvStepUser + " is unset"},
		{EnvSharedPaths, "", "colon-separated host directories every job's sandbox keeps writable"},
		{EnvAllowUnconfined, "false", "true ⇒ run untrusted (fork pull request) jobs even when steps run as the agent's own user"},
	}
}

// LoadConfig reads the configuration from environ ("K=V" entries). Errors
// name the variable. When KICI_AGENT_TOKEN_FD is set it reads the token
// from that inherited descriptor and closes it, so call it once.
func LoadConfig(environ []string) (*Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	c := &Config{
		OrchestratorURL:              strings.TrimSpace(env["KICI_ORCHESTRATOR_URL"]),
		AgentID:                      strings.TrimSpace(env["KICI_AGENT_ID"]),
		WorkDir:                      env["KICI_WORK_DIR"],
		Hostname:                     host,
		MaxLogSizeBytes:              10 << 20,
		DefaultStepTimeout:           30 * time.Minute,
		JobHeartbeatInterval:         60 * time.Second,
		ScalerIdleTimeout:            5 * time.Second,
		ScalerPendingDispatchTimeout: 60 * time.Second,
	}
	if err := c.loadToken(env); err != nil {
		return nil, err
	}
	if c.OrchestratorURL == "" {
		return nil, fmt.Errorf("KICI_ORCHESTRATOR_URL is required (e.g. ws://127.0.0.1:4000/ws)")
	}
	for _, raw := range strings.Split(c.OrchestratorURL, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("KICI_ORCHESTRATOR_URL: %q must be a ws:// or wss:// URL with a host (several are separated by commas)", raw)
		}
		c.OrchestratorURLs = append(c.OrchestratorURLs, raw)
	}
	c.OrchestratorURL = c.OrchestratorURLs[0]
	if c.AgentID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.AgentID = host + "-" + hex.EncodeToString(b[:])
	}
	for _, l := range strings.Split(env["KICI_LABELS"], ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if strings.HasPrefix(strings.ToLower(l), "kici:") {
			return nil, fmt.Errorf("KICI_LABELS: label %q uses the reserved kici: prefix", l)
		}
		c.Labels = append(c.Labels, l)
	}
	intVar := func(name string, dst *int64) error {
		v := strings.TrimSpace(env[name])
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s: want a positive integer, got %q", name, v)
		}
		*dst = n
		return nil
	}
	msVar := func(name string, dst *time.Duration) error {
		n := dst.Milliseconds()
		if err := intVar(name, &n); err != nil {
			return err
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	if err := intVar("KICI_MAX_LOG_SIZE_BYTES", &c.MaxLogSizeBytes); err != nil {
		return nil, err
	}
	for name, dst := range map[string]*time.Duration{
		"KICI_DEFAULT_STEP_TIMEOUT_MS":         &c.DefaultStepTimeout,
		"KICI_JOB_HEARTBEAT_INTERVAL_MS":       &c.JobHeartbeatInterval,
		"KICI_SCALER_IDLE_TIMEOUT":             &c.ScalerIdleTimeout,
		"KICI_SCALER_PENDING_DISPATCH_TIMEOUT": &c.ScalerPendingDispatchTimeout,
	} {
		if err := msVar(name, dst); err != nil {
			return nil, err
		}
	}
	switch v := strings.TrimSpace(env[EnvJobContainer]); v {
	case "":
	case JobContainerPod:
		c.InPod = true
	default:
		return nil, fmt.Errorf("%s: want %q (the agent runs in the job's Kubernetes pod) or unset, got %q", EnvJobContainer, JobContainerPod, v)
	}
	for name, dst := range map[string]*bool{"KICI_SCALER_MANAGED": &c.ScalerManaged, "KICI_AGENT_JOB_HOME": &c.JobHome} {
		switch v := strings.ToLower(strings.TrimSpace(env[name])); v {
		case "", "false", "0", "no":
		case "true", "1", "yes":
			*dst = true
		default:
			return nil, fmt.Errorf("%s: want true or false, got %q", name, v)
		}
	}
	return c, nil
}

// AllLabels is the user labels followed by AutoLabels for this host.
func (c *Config) AllLabels() []string {
	return append(append([]string{}, c.Labels...), protocol.AutoLabels(runtime.GOOS, runtime.GOARCH, c.Hostname)...)
}

// maxTokenBytes bounds what is read from KICI_AGENT_TOKEN_FD or
// KICI_AGENT_TOKEN_FILE.
const maxTokenBytes = 4096

// loadToken sets Token from exactly one of KICI_AGENT_TOKEN,
// KICI_AGENT_TOKEN_FD (agents the bare-metal and container scalers spawn)
// and KICI_AGENT_TOKEN_FILE (the kubernetes scaler's pods), so that a
// spawned agent's token never sits in its environment (readable by steps
// at /proc/<agent pid>/environ, and in a pod spec by anyone who may read
// pods). Setting more than one is an error.
func (c *Config) loadToken(env map[string]string) error {
	fdStr := strings.TrimSpace(env["KICI_AGENT_TOKEN_FD"])
	file := strings.TrimSpace(env["KICI_AGENT_TOKEN_FILE"])
	c.Token = strings.TrimSpace(env["KICI_AGENT_TOKEN"])
	var set []string
	for _, name := range []string{"KICI_AGENT_TOKEN", "KICI_AGENT_TOKEN_FD", "KICI_AGENT_TOKEN_FILE"} {
		if strings.TrimSpace(env[name]) != "" {
			set = append(set, name)
		}
	}
	if len(set) > 1 {
		return fmt.Errorf("%s are set; set only one of them", strings.Join(set, " and "))
	}
	if file != "" {
		return c.loadTokenFile(file)
	}
	if fdStr == "" {
		return nil
	}
	fd, err := strconv.Atoi(fdStr)
	if err != nil || (fd != 0 && fd < 3) {
		return fmt.Errorf("KICI_AGENT_TOKEN_FD: want 0 (standard input) or a file descriptor number ≥ 3, got %q", fdStr)
	}
	// Standard input is read through os.Stdin and stays open (read to its
	// end): a second *os.File of descriptor 0 would close it when
	// garbage-collected, and the descriptor, reused by the next file or
	// socket the agent opens, would be closed again under that one.
	f := os.Stdin
	if fd != 0 {
		if f = os.NewFile(uintptr(fd), "KICI_AGENT_TOKEN_FD"); f == nil {
			return fmt.Errorf("KICI_AGENT_TOKEN_FD: invalid descriptor %d", fd)
		}
		defer f.Close()
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return fmt.Errorf("KICI_AGENT_TOKEN_FD: reading descriptor %d: %w", fd, err)
	}
	if len(b) > maxTokenBytes {
		return fmt.Errorf("KICI_AGENT_TOKEN_FD: descriptor %d holds more than %d bytes", fd, maxTokenBytes)
	}
	c.Token = strings.TrimSpace(string(b))
	if c.Token == "" {
		return fmt.Errorf("KICI_AGENT_TOKEN_FD: descriptor %d gave an empty token", fd)
	}
	return nil
}

// loadTokenFile reads the token from path once: a regular file (a
// Kubernetes Secret volume's key is a symbolic link to one, which is
// followed) of at most maxTokenBytes, with one trailing newline trimmed.
// The kubernetes scaler mounts that Secret read-only, so the agent cannot
// remove it; steps run as another user (or the file stays readable only
// for the life of a one-job pod the token is valid for).
func (c *Config) loadTokenFile(path string) error {
	// O_NONBLOCK: opening a FIFO for reading would wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > maxTokenBytes {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %s holds %d bytes, more than %d", path, fi.Size(), maxTokenBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: reading %s: %w", path, err)
	}
	if len(b) > maxTokenBytes { // it grew after the stat
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %s holds more than %d bytes", path, maxTokenBytes)
	}
	tok := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(tok) == "" {
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %s is empty", path)
	}
	if strings.ContainsAny(tok, "\r\n") || strings.TrimSpace(tok) != tok {
		// A token is one line of text; anything else is a wrong file,
		// and a token with blanks around it would be refused anyway.
		return fmt.Errorf("KICI_AGENT_TOKEN_FILE: %s is not one line without surrounding blanks", path)
	}
	c.Token = tok
	return nil
}
