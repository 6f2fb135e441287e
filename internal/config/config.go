// Package config reads kici's configuration from KICI_* environment variables
// (KiCI's names, see Vars and docs/configuration.md) and manages the files a
// local orchestrator leaves in its data directory for kici-admin
// (orchestrator.json and admin-token).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mode is the orchestrator mode, KICI_MODE: one of the Mode* constants
// (KiCI's orchestrator modes, see docs/kici-compatibility.md#environment-variables).
type Mode string

// Orchestrator modes.
const (
	// ModeIndependent is kici's default: the orchestrator decides held runs
	// and keeps the trust policy itself.
	ModeIndependent Mode = "independent"
	// ModeObserved leaves held runs and the trust policy to the KiCI
	// Platform and refuses GitHub-App sources (docs/ingress.md).
	ModeObserved Mode = "observed"
	// ModeHybrid leaves held runs and the trust policy to the KiCI Platform.
	ModeHybrid Mode = "hybrid"
	// ModePlatform leaves held runs and the trust policy to the KiCI
	// Platform and serves no direct GitHub route (docs/ingress.md).
	ModePlatform Mode = "platform"
)

// Modes accepted by KICI_MODE (KiCI's orchestrator modes).
var Modes = []Mode{ModeIndependent, ModeObserved, ModeHybrid, ModePlatform}

// PlatformConnected reports whether m hands held-run decisions and the
// trust policy to the KiCI Platform (platform, hybrid and observed).
func (m Mode) PlatformConnected() bool {
	return m == ModePlatform || m == ModeHybrid || m == ModeObserved
}

// LogLevels accepted by KICI_LOG_LEVEL.
var LogLevels = []string{"debug", "info", "warn", "error"}

// Defaults.
const (
	// DefaultHost is the listen address when KICI_HOST is unset. KiCI uses
	// 0.0.0.0; kici listens on loopback by default (documented departure).
	DefaultHost = "127.0.0.1"
	// DefaultPort is the listen port when KICI_PORT is unset.
	DefaultPort = 4000
	// DefaultMode is the orchestrator mode when KICI_MODE is unset.
	DefaultMode = ModeIndependent
	// DefaultMaxAgents is the process-scaler limit when KICI_MAX_AGENTS is unset.
	DefaultMaxAgents = 4
	// DefaultLogLevel is the log level when KICI_LOG_LEVEL is unset.
	DefaultLogLevel = "info"
	// DefaultDispatchAckTimeout is KICI_DISPATCH_ACK_TIMEOUT_MS's default.
	DefaultDispatchAckTimeout = 10 * time.Second
	// DefaultAgentTokenTTL is KICI_AGENT_TOKEN_TTL_MS's default.
	DefaultAgentTokenTTL = time.Hour
)

// Config is the orchestrator configuration from KICI_* env (KiCI names).
type Config struct {
	// DataDir is KICI_DATA_DIR, else DefaultDataDir's choice. Always absolute.
	DataDir string
	// Host is KICI_HOST, default 127.0.0.1 (KiCI's is 0.0.0.0; see
	// docs/kici-compatibility.md#environment-variables).
	Host string
	// Port is KICI_PORT, default 4000; 0 = pick a free port.
	Port int
	// DatabaseURL is KICI_DATABASE_URL; empty ⇒ SQLite at DatabasePath().
	DatabaseURL string
	// StepLogStore is KICI_STEP_LOG_STORE: StepLogsPostgres (the default
	// with a DatabaseURL) or StepLogsFiles (the default without).
	StepLogStore StepLogStore
	// StepLogMaxBytes is KICI_STEP_LOG_MAX_BYTES: the per-step cap on
	// stored agent output, default DefaultStepLogMaxBytes; 0 = no cap.
	StepLogMaxBytes int64
	// StepLogCompress is KICI_STEP_LOG_COMPRESS (default true): on
	// PostgreSQL, step-log chunks are written compressed by the
	// orchestrator (S2) while every live node reads them; false writes
	// them plain always.
	StepLogCompress bool
	// LogArchive is KICI_LOG_ARCHIVE (default true): finished step logs
	// move to the blob store (KICI_STORAGE_TYPE).
	LogArchive bool
	// LogArchiveAfter is KICI_LOG_ARCHIVE_AFTER_MS (default
	// DefaultLogArchiveAfter): how long a finished job's logs stay quiet
	// before they are archived.
	LogArchiveAfter time.Duration
	// BootstrapAdminToken is KICI_BOOTSTRAP_ADMIN_TOKEN (owner role), or "".
	BootstrapAdminToken string
	// Mode is KICI_MODE: independent (default), observed, hybrid or platform.
	Mode Mode
	// MaxAgents is KICI_MAX_AGENTS (embedded process scaler), default 4.
	MaxAgents int
	// AgentBinary is KICI_AGENT_BINARY, default kici-agent beside the
	// executable, else found on PATH; "" when neither exists.
	AgentBinary string
	// LogLevel is KICI_LOG_LEVEL: debug, info (default), warn or error.
	LogLevel string
	// DispatchAckTimeout is KICI_DISPATCH_ACK_TIMEOUT_MS, default 10 s.
	DispatchAckTimeout time.Duration
	// AgentTokenTTL is KICI_AGENT_TOKEN_TTL_MS, default 1 h.
	AgentTokenTTL time.Duration
	// RequestBodyGrace is KICI_REQUEST_BODY_GRACE_MS, default 10 s: how long
	// a request body may take before it must keep 16 KiB/s on average
	// (internal/httpguard).
	RequestBodyGrace time.Duration
	// ScalerConfigPath is KICI_SCALER_CONFIG_PATH (scalers.yaml); "" ⇒ the
	// embedded default bare-metal scaler.
	ScalerConfigPath string
	// ScalerConfigDir is KICI_SCALER_CONFIG_DIR (scalers.d/); "" ⇒ the
	// scalers.d directory beside ScalerConfigPath when it exists.
	ScalerConfigDir string
	// WorkDir is KICI_WORK_DIR, the parent of bare-metal agents' job work
	// directories (absolute); "" ⇒ scaler.DefaultWorkDir, outside DataDir.
	WorkDir string
	// ScalerSpawnTimeout is KICI_SCALER_SPAWN_TIMEOUT_MS, default 300 s
	// (the cluster setting scaler_spawn_timeout_ms overrides it).
	ScalerSpawnTimeout time.Duration
	// ClusterSettingsCacheTTL is KICI_CLUSTER_SETTINGS_CACHE_TTL_MS,
	// default 10 s.
	ClusterSettingsCacheTTL time.Duration
	// ClusterAddress is KICI_CLUSTER_ADDRESS (KiCI's name): the base URL
	// (http://host:port) under which the other nodes' agents reach this
	// node, recorded in the node registry. Empty ⇒ derived from the
	// listener (see orchestrator's advertised address).
	ClusterAddress string
	// OrchestratorURL is KICI_ORCHESTRATOR_URL, the WebSocket URL given to
	// spawned agents; "" ⇒ the orchestrator derives ws://127.0.0.1:<port>/ws.
	OrchestratorURL string
	// ProvenanceIssuer is KICI_ORCHESTRATOR_PROVENANCE_ISSUER, the issuer URL
	// of signed build provenance; "" disables signing (docs/provenance.md).
	ProvenanceIssuer string
	// TLSCertFile and TLSKeyFile are KICI_TLS_CERT_FILE and
	// KICI_TLS_KEY_FILE: when both are set the orchestrator serves HTTPS
	// (and wss:// to agents) with that PEM certificate chain and key,
	// reloaded on SIGHUP and when a file changes (internal/tlsconf).
	// Both or neither.
	TLSCertFile, TLSKeyFile string
	// TLSCAFile is KICI_TLS_CA_FILE: extra PEM CA certificates the
	// orchestrator's agents trust; passed on to the agents it spawns
	// (default: TLSCertFile, which a self-signed certificate needs).
	TLSCAFile string
	// ShutdownGrace is KICI_SHUTDOWN_GRACE_MS, default 10 s: on SIGTERM the
	// node drains first (no new job handed out) and waits this long for
	// the jobs running on its agents to finish before it stops; 0 stops
	// at once.
	ShutdownGrace time.Duration
	// Ingress holds the webhook-ingress limits (ingress.go).
	Ingress Ingress
}

// DefaultStepLogMaxBytes is KICI_STEP_LOG_MAX_BYTES's default: 256 MiB.
const DefaultStepLogMaxBytes = 256 << 20

// DefaultLogArchiveAfter is KICI_LOG_ARCHIVE_AFTER_MS's default.
const DefaultLogArchiveAfter = time.Minute

// DefaultShutdownGrace is KICI_SHUTDOWN_GRACE_MS's default: KiCI's agent
// gives its graceful stop 10 s, and Docker's stop timeout is 10 s too.
const DefaultShutdownGrace = 10 * time.Second

// TLS reports whether the orchestrator serves HTTPS.
func (c *Config) TLS() bool { return c.TLSCertFile != "" }

// Scheme is the URL scheme the orchestrator serves: "https" with TLS,
// else "http".
func (c *Config) Scheme() string {
	if c.TLS() {
		return "https"
	}
	return "http"
}

// StepLogStore is where step logs are kept, KICI_STEP_LOG_STORE:
// StepLogsPostgres or StepLogsFiles (a kici setting, see
// docs/configuration.md).
type StepLogStore string

// Values of KICI_STEP_LOG_STORE.
const (
	// StepLogsPostgres keeps step logs in the PostgreSQL database.
	StepLogsPostgres StepLogStore = "postgres"
	// StepLogsFiles keeps step logs under <data dir>/logs.
	StepLogsFiles StepLogStore = "files"
)

// DatabasePath is the SQLite file used when DatabaseURL is empty.
func (c *Config) DatabasePath() string { return DatabaseFile(c.DataDir) }

// DatabaseFile is the embedded SQLite database file of the data directory
// dataDir: <dataDir>/kici.db.
func DatabaseFile(dataDir string) string { return filepath.Join(dataDir, "kici.db") }

// Load builds a Config from environ (os.Environ() form, "KEY=value").
// Errors (joined, one per problem): any KICI_* variable not in Vars
// ("unknown environment variable KICI_FOO (known: …; did you mean …?)"), and
// malformed values (port not a number or out of range, unknown mode or log
// level, non-positive limits, durations below their minimum).
func Load(environ []string) (*Config, error) {
	env := map[string]string{}
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if strings.HasPrefix(k, "KICI_") {
			if _, ok := lookupVar(k); !ok {
				errs = append(errs, unknownVarError(k))
			}
		}
	}
	get := func(k string) string { return strings.TrimSpace(env[k]) }

	c := &Config{
		Host:                    DefaultHost,
		Port:                    DefaultPort,
		DatabaseURL:             get("KICI_DATABASE_URL"),
		BootstrapAdminToken:     get("KICI_BOOTSTRAP_ADMIN_TOKEN"),
		Mode:                    DefaultMode,
		MaxAgents:               DefaultMaxAgents,
		LogLevel:                DefaultLogLevel,
		DispatchAckTimeout:      DefaultDispatchAckTimeout,
		AgentTokenTTL:           DefaultAgentTokenTTL,
		OrchestratorURL:         get("KICI_ORCHESTRATOR_URL"),
		ScalerConfigPath:        get("KICI_SCALER_CONFIG_PATH"),
		ScalerConfigDir:         get("KICI_SCALER_CONFIG_DIR"),
		ScalerSpawnTimeout:      300 * time.Second,
		ClusterSettingsCacheTTL: 10 * time.Second,
		RequestBodyGrace:        10 * time.Second,
		ShutdownGrace:           DefaultShutdownGrace,
	}
	if v := get("KICI_HOST"); v != "" {
		c.Host = v
	}
	if v := get("KICI_CLUSTER_ADDRESS"); v != "" {
		if err := checkClusterAddress(v); err != nil {
			errs = append(errs, err)
		} else {
			c.ClusterAddress = strings.TrimSuffix(v, "/")
		}
	}
	if v := get("KICI_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("KICI_PORT=%q: must be a port number between 0 and 65535 (0 = pick a free port)", v))
		} else {
			c.Port = p
		}
	}
	if v := get("KICI_MODE"); v != "" {
		if !slices.Contains(Modes, Mode(v)) {
			errs = append(errs, fmt.Errorf("KICI_MODE=%q: unknown mode (allowed: %s)", v, joinModes(Modes)))
		} else {
			c.Mode = Mode(v)
		}
	}
	if v := get("KICI_LOG_LEVEL"); v != "" {
		if !oneOf(strings.ToLower(v), LogLevels) {
			errs = append(errs, fmt.Errorf("KICI_LOG_LEVEL=%q: unknown level (allowed: %s)", v, strings.Join(LogLevels, ", ")))
		} else {
			c.LogLevel = strings.ToLower(v)
		}
	}
	if v := get("KICI_MAX_AGENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("KICI_MAX_AGENTS=%q: must be a positive integer", v))
		} else {
			c.MaxAgents = n
		}
	}
	parseMs := func(name string, min time.Duration, dst *time.Duration) {
		v := get(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || time.Duration(n)*time.Millisecond < min {
			errs = append(errs, fmt.Errorf("%s=%q: must be an integer number of milliseconds ≥ %d", name, v, min.Milliseconds()))
			return
		}
		*dst = time.Duration(n) * time.Millisecond
	}
	parseMs("KICI_DISPATCH_ACK_TIMEOUT_MS", time.Second, &c.DispatchAckTimeout)
	parseMs("KICI_AGENT_TOKEN_TTL_MS", time.Second, &c.AgentTokenTTL)
	parseMs("KICI_REQUEST_BODY_GRACE_MS", 100*time.Millisecond, &c.RequestBodyGrace)
	parseMs("KICI_SCALER_SPAWN_TIMEOUT_MS", time.Second, &c.ScalerSpawnTimeout)
	parseMs("KICI_CLUSTER_SETTINGS_CACHE_TTL_MS", time.Millisecond, &c.ClusterSettingsCacheTTL)
	parseMs("KICI_SHUTDOWN_GRACE_MS", 0, &c.ShutdownGrace)
	c.StepLogMaxBytes, c.LogArchive, c.LogArchiveAfter, c.StepLogCompress = DefaultStepLogMaxBytes, true, DefaultLogArchiveAfter, true
	if v := get("KICI_STEP_LOG_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || (n > 0 && n < 64<<10) {
			errs = append(errs, fmt.Errorf("KICI_STEP_LOG_MAX_BYTES=%q: must be a number of bytes ≥ 65536, or 0 for no cap", v))
		} else {
			c.StepLogMaxBytes = n
		}
	}
	if v := get("KICI_LOG_ARCHIVE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_LOG_ARCHIVE=%q: must be true or false", v))
		} else {
			c.LogArchive = b
		}
	}
	if v := get("KICI_STEP_LOG_COMPRESS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_STEP_LOG_COMPRESS=%q: must be true or false", v))
		} else {
			c.StepLogCompress = b
		}
	}
	parseMs("KICI_LOG_ARCHIVE_AFTER_MS", 0, &c.LogArchiveAfter)
	if u := c.DatabaseURL; u != "" && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		errs = append(errs, fmt.Errorf("KICI_DATABASE_URL: must be a postgres:// or postgresql:// URL (leave it empty for the embedded SQLite database)"))
	}
	c.StepLogStore = StepLogsFiles
	if c.DatabaseURL != "" {
		c.StepLogStore = StepLogsPostgres
	}
	switch v := StepLogStore(get("KICI_STEP_LOG_STORE")); {
	case v == "":
	case v != StepLogsFiles && v != StepLogsPostgres:
		errs = append(errs, fmt.Errorf("KICI_STEP_LOG_STORE=%q: must be %s or %s", v, StepLogsPostgres, StepLogsFiles))
	case v == StepLogsPostgres && c.DatabaseURL == "":
		errs = append(errs, fmt.Errorf("KICI_STEP_LOG_STORE=postgres needs KICI_DATABASE_URL (the embedded SQLite default keeps logs in files)"))
	default:
		c.StepLogStore = v
	}

	if v := get("KICI_DATA_DIR"); v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_DATA_DIR=%q: %v", v, err))
		}
		c.DataDir = abs
	} else {
		c.DataDir = resolveDataDir(func(k string) string { return env[k] }, dirWritable)
	}

	if v := get("KICI_WORK_DIR"); v != "" {
		if !filepath.IsAbs(v) {
			errs = append(errs, fmt.Errorf("KICI_WORK_DIR=%q: must be an absolute path", v))
		}
		c.WorkDir = filepath.Clean(v)
		if rel, err := filepath.Rel(c.DataDir, c.WorkDir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			errs = append(errs, fmt.Errorf("KICI_WORK_DIR=%q: must not be inside the data directory %s (a job step would reach the admin token and the database)", v, c.DataDir))
		}
	}

	if v := get("KICI_AGENT_BINARY"); v != "" {
		c.AgentBinary = v
	} else {
		c.AgentBinary = defaultAgentBinary()
	}

	if iss, err := ParseIssuer(get("KICI_ORCHESTRATOR_PROVENANCE_ISSUER")); err != nil {
		errs = append(errs, err)
	} else {
		c.ProvenanceIssuer = iss
	}

	errs = append(errs, loadTLS(get, c)...)
	errs = append(errs, loadIngress(get, &c.Ingress)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// DefaultDataDir returns the data directory used when KICI_DATA_DIR is unset:
// /var/lib/kici if it is writable (or can be created), else
// $XDG_STATE_HOME/kici (default ~/.local/state/kici), else $TMPDIR/kici-data.
// It reads the process environment and creates nothing.
func DefaultDataDir() string {
	return resolveDataDir(os.Getenv, dirWritable)
}

// systemDataDir is the preferred data directory (KiCI's).
var systemDataDir = "/var/lib/kici"

// resolveDataDir implements DefaultDataDir with injectable environment and
// writability check.
func resolveDataDir(getenv func(string) string, writable func(string) bool) string {
	if writable(systemDataDir) {
		return systemDataDir
	}
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "kici")
	}
	if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "kici")
	}
	tmp := getenv("TMPDIR")
	if tmp == "" || !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "kici-data")
}

// dirWritable reports whether dir exists and is writable, or does not exist
// and its nearest existing ancestor is writable (so it could be created).
func dirWritable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			return fi.IsDir() && syscall.Access(d, 2 /* W_OK */) == nil
		}
		if !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			return false
		}
	}
}

// defaultAgentBinary finds kici-agent beside the running executable, then on
// PATH; "" when neither exists.
func defaultAgentBinary() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "kici-agent")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("kici-agent"); err == nil {
		return p
	}
	return ""
}

// joinModes lists ms separated by ", ".
func joinModes(ms []Mode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

func oneOf(s string, list []string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// FindAgentBinary returns the kici-agent executable the process scaler
// spawns: cfg.AgentBinary (KICI_AGENT_BINARY, or the default Load found)
// resolved on PATH when it has no slash, checked to be an executable file.
// Errors say what was tried and how to fix it.
func FindAgentBinary(cfg *Config) (string, error) {
	p := cfg.AgentBinary
	if p == "" {
		p = defaultAgentBinary()
	}
	if p == "" {
		where := "on PATH"
		if exe, err := os.Executable(); err == nil {
			where = "beside " + exe + " or on PATH"
		}
		return "", fmt.Errorf("kici-agent not found %s: build it (go build ./cmd/kici-agent) or set KICI_AGENT_BINARY", where)
	}
	if !strings.ContainsRune(p, filepath.Separator) {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("KICI_AGENT_BINARY=%q: %v", p, err)
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("agent binary %q: %w", p, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("agent binary %s: %w (set KICI_AGENT_BINARY)", abs, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("agent binary %s is not an executable file (set KICI_AGENT_BINARY)", abs)
	}
	return abs, nil
}

// SlogLevel maps LogLevel to a log/slog level (info when unset or unknown).
func (c *Config) SlogLevel() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// checkClusterAddress accepts an http(s) base URL with a host, an optional
// port in 1–65535, and no path, query, fragment or user info, e.g.
// http://10.0.0.2:4000 or https://ci-1.internal. Errors say what is wrong
// and never repeat user info (it may hold a password).
func checkClusterAddress(v string) error {
	const want = "this node's base URL as other nodes' agents reach it, e.g. http://10.0.0.2:4000"
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return fmt.Errorf("KICI_CLUSTER_ADDRESS: not a URL with a host: want %s", want)
	}
	show := *u
	show.User = nil
	bad := func(why string) error {
		return fmt.Errorf("KICI_CLUSTER_ADDRESS=%q: %s; want %s", show.String(), why, want)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("the scheme must be http or https")
	case u.User != nil:
		return bad("user info (user:password@) is not allowed")
	case strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		return bad("no path, query or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("the port must be 1–65535")
		}
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return bad(u.Hostname() + " is not an address anyone can dial; give this node's reachable host name or IP")
	}
	return nil
}

// loadTLS reads KICI_TLS_CERT_FILE, KICI_TLS_KEY_FILE and KICI_TLS_CA_FILE:
// the first two come together and must name readable files (their pair
// is checked when the server loads them).
func loadTLS(get func(string) string, c *Config) []error {
	var errs []error
	c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile = get("KICI_TLS_CERT_FILE"), get("KICI_TLS_KEY_FILE"), get("KICI_TLS_CA_FILE")
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("KICI_TLS_CERT_FILE and KICI_TLS_KEY_FILE: set both (the PEM certificate chain and its private key) or neither"))
	}
	for _, v := range [][2]string{{"KICI_TLS_CERT_FILE", c.TLSCertFile}, {"KICI_TLS_KEY_FILE", c.TLSKeyFile}, {"KICI_TLS_CA_FILE", c.TLSCAFile}} {
		if v[1] == "" {
			continue
		}
		if f, err := os.Open(v[1]); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v (the file must be readable by the orchestrator's user)", v[0], v[1], err))
		} else {
			f.Close()
		}
	}
	if len(errs) > 0 {
		c.TLSCertFile, c.TLSKeyFile = "", ""
	}
	return errs
}
