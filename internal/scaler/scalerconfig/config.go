package scalerconfig

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"kici.dev/kici/internal/boundedre"
)

// BackendType is a scaler's backend, the `type` of a scalers.yaml entry:
// one of the Type* constants (KiCI's bare-metal, container and firecracker,
// and the kici qemu backend), see docs/kici-compatibility.md#scaling.
type BackendType string

// Backend types accepted in scalers.yaml (KiCI `type`).
const (
	// TypeBareMetal runs each agent as a process on the orchestrator's host (KiCI).
	TypeBareMetal BackendType = "bare-metal"
	// TypeContainer runs each agent in a Docker container (KiCI).
	TypeContainer BackendType = "container"
)

// DefaultGlobalMaxAgents is globalMaxAgents when the file omits it (KiCI).
const DefaultGlobalMaxAgents = 50

// DefaultMaxConcurrentSpawns is a scaler's maxConcurrentSpawns when unset
// (KiCI DEFAULT_MAX_CONCURRENT_SPAWNS).
const DefaultMaxConcurrentSpawns = 8

// Config is a validated scalers.yaml (plus scalers.d/*.yaml; see
// docs/kici-compatibility.md#scaling). Load and Parse return
// it fully defaulted; never build one by hand without Validate.
type Config struct {
	// Version is the format version; only 1 exists.
	Version int `yaml:"version" json:"version"`
	// GlobalMaxAgents caps agents across every scaler of this process
	// (default 50).
	GlobalMaxAgents int `yaml:"globalMaxAgents" json:"globalMaxAgents"`
	// Defaults is the lowest layer of the resource cascade.
	Defaults *Defaults `yaml:"defaults" json:"defaults,omitempty"`
	// Scalers are the backends, in file order (scalers.d files appended in
	// name order).
	Scalers []*Entry `yaml:"scalers" json:"scalers"`
	// Firecracker is the network block shared by firecracker scalers.
	Firecracker *FirecrackerNetwork `yaml:"firecracker" json:"firecracker,omitempty"`

	mainFile string // the main file, for errors
}

// Defaults holds file-wide defaults.
type Defaults struct {
	// Resources applies to label sets without their own resources.
	Resources *Resources `yaml:"resources" json:"resources,omitempty"`
}

// Entry is one scaler (KiCI scalerEntrySchema). Fields that apply to one
// backend type only are rejected on the others.
type Entry struct {
	// Name is unique, [a-z0-9-], 1–63 characters; it appears in the
	// kici:scaler:<name> label and the kici-scaler-name container label.
	Name string `yaml:"name" json:"name"`
	// Type is bare-metal, container, firecracker, qemu or kubernetes. It
	// cannot change on reload.
	Type BackendType `yaml:"type" json:"type"`
	// MaxAgents caps this scaler's agents (alive or spawning); required, > 0.
	MaxAgents int `yaml:"maxAgents" json:"maxAgents"`
	// MaxConcurrentSpawns bounds concurrent backend spawn calls (default 8).
	MaxConcurrentSpawns int `yaml:"maxConcurrentSpawns" json:"maxConcurrentSpawns"`
	// LabelSets are the agent shapes this scaler can start (at least one).
	LabelSets []*LabelSet `yaml:"labelSets" json:"labelSets"`
	// Platform sets the kici:os:/kici:arch: labels of spawned agents and
	// taints the scaler: jobs must ask for that os/arch explicitly when it
	// is not linux/x64. Absent: a bare-metal scaler takes its host's
	// platform (untainted), a container scaler is linux (untainted).
	Platform *Platform `yaml:"platform" json:"platform,omitempty"`
	// Roles adds kici:role:<role> labels (all, builder, init-runner); absent
	// or [all] = every role; [] = execution jobs only (no role label).
	Roles *[]string `yaml:"roles" json:"roles,omitempty"`
	// MandatoryLabels is a taint gate: a job is served only when its runsOn
	// names every one of them. Each must appear in every label set.
	MandatoryLabels []string `yaml:"mandatoryLabels" json:"mandatoryLabels,omitempty"`
	// OrchestratorURL is the WebSocket URL the spawned agent dials (this
	// field > KICI_ORCHESTRATOR_URL > the orchestrator's own listener).
	OrchestratorURL string `yaml:"orchestratorUrl" json:"orchestratorUrl,omitempty"`
	// EnforceCgroups (bare-metal) wraps the agent in `systemd-run --user
	// --scope` with CPUQuota/MemoryMax from the limits.
	EnforceCgroups bool `yaml:"enforceCgroups" json:"enforceCgroups,omitempty"`
	// SocketPath (container) is the Docker Engine socket (default
	// /var/run/docker.sock, or DOCKER_HOST).
	SocketPath string `yaml:"socketPath" json:"socketPath,omitempty"`
	// WarmPool keeps idle agents ready per label set (KiCI warmPool).
	WarmPool *WarmPool `yaml:"warmPool" json:"warmPool,omitempty"`
	// FirecrackerEntry holds the firecracker-only fields.
	FirecrackerEntry `yaml:",inline"`
	// QEMUEntry holds the qemu-only fields.
	QEMUEntry `yaml:",inline"`
	// KubernetesEntry holds the kubernetes-only fields.
	KubernetesEntry `yaml:",inline"`

	file string // the file the entry came from, for errors
}

// WarmPool keeps Size idle, unbound agents of each label set running so a
// job starts without waiting for a spawn (KiCI WarmPoolManager). Warm
// agents count against maxAgents and globalMaxAgents; an agent that takes
// a job leaves the pool (single use) and the pool refills. Only surplus
// agents (above Size, e.g. after a reload lowered it, or with the pool
// disabled) that have been idle longer than IdleTimeoutSeconds are reaped.
type WarmPool struct {
	Enabled            bool `yaml:"enabled" json:"enabled"`
	Size               int  `yaml:"size" json:"size"`
	IdleTimeoutSeconds int  `yaml:"idleTimeoutSeconds" json:"idleTimeoutSeconds"`
}

// Platform is a scaler's os/arch, KiCI's values: os linux|macos|windows,
// arch x64|arm64.
type Platform struct {
	OS   string `yaml:"os" json:"os"`
	Arch string `yaml:"arch" json:"arch"`
}

// LabelSet is one agent shape (KiCI labelSetConfigSchema).
type LabelSet struct {
	// Labels are the agent's routing labels: lower-cased, no kici: prefix.
	Labels []string `yaml:"labels" json:"labels"`
	// Image (container and kubernetes, required) is the agent image.
	Image string `yaml:"image" json:"image,omitempty"`
	// ImagePullPolicy (container and kubernetes) is Always, IfNotPresent
	// (default) or Never.
	ImagePullPolicy string `yaml:"imagePullPolicy" json:"imagePullPolicy,omitempty"`
	// BinaryPath (bare-metal) is the kici-agent executable (default: the
	// one found next to the orchestrator, KICI_AGENT_BINARY).
	BinaryPath string `yaml:"binaryPath" json:"binaryPath,omitempty"`
	// Resources are the agent's limits.
	Resources *Resources `yaml:"resources" json:"resources,omitempty"`
	// Env is extra agent environment; it wins over forwarded
	// KICI_AGENT_ENV_* values. KICI_* names are refused.
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// FirecrackerLabelSet holds the firecracker-only fields.
	FirecrackerLabelSet `yaml:",inline"`
	// KubernetesLabelSet holds the kubernetes-only pod-template fields.
	KubernetesLabelSet `yaml:",inline"`
}

// Resources are limits in KiCI's flat form: cpus (fractional, ≤ 256) and
// memory ("512m", "4g", binary multiples, or plain bytes).
type Resources struct {
	CPUs   *float64 `yaml:"cpus" json:"cpus,omitempty"`
	Memory *string  `yaml:"memory" json:"memory,omitempty"`
}

// Limits are resolved resources: 0 = unlimited.
type Limits struct {
	// NanoCPUs is cpus × 1e9.
	NanoCPUs int64 `json:"nanoCpus"`
	// MemoryBytes is the memory limit in bytes.
	MemoryBytes int64 `json:"memoryBytes"`
}

// ConfigError is a validation failure: the file, the field path
// (scalers[1].labelSets[0].labels[2]) and what is wrong.
type ConfigError struct {
	File  string
	Field string
	Msg   string
}

// Error is "<file>: <field>: <msg>" (file scalers.yaml when unknown).
func (e *ConfigError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "scalers.yaml"
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return loc + ": " + e.Msg
}

// File is the file e came from (the main file or a scalers.d fragment),
// for errors about it.
func (e *Entry) File() string { return e.file }

// IsEnvName reports whether k is a valid environment variable name
// ([A-Za-z_][A-Za-z0-9_]*), as env: keys must be.
func IsEnvName(k string) bool { return envRe.MatchString(k) }

var (
	nameRe  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	labelRe = boundedre.MustCompile(`^[a-z0-9][a-z0-9._/:+-]{0,127}$`, 1, 128)
	envRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	memRe   = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([kKmMgG]?)$`)
)

// ParseMemory parses a KiCI memory string: a number with an optional k/m/g
// suffix (either case, binary multiples: 512m = 512·2²⁰ bytes).
func ParseMemory(s string) (int64, error) {
	m := memRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid memory %q: want a number with an optional k, m or g suffix (e.g. 512m, 4g)", s)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid memory %q", s)
	}
	switch strings.ToLower(m[2]) {
	case "k":
		f *= 1 << 10
	case "m":
		f *= 1 << 20
	case "g":
		f *= 1 << 30
	}
	if f < 1 || f > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid memory %q: out of range", s)
	}
	return int64(f), nil
}

// Load reads path (KICI_SCALER_CONFIG_PATH) and every *.yaml/*.yml file of
// dir (KICI_SCALER_CONFIG_DIR; "" = none) in name order, appends their
// scalers[] to the main file's, and validates the merged document. Files in
// dir may hold only `scalers:`. Errors are *ConfigError naming the file and
// field (YAML errors carry line:column).
func Load(path, dir string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	cfg, err := decode(path, b, false)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, &ConfigError{File: dir, Msg: err.Error()}
		}
		var names []string
		for _, e := range ents {
			n := e.Name()
			if !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, &ConfigError{File: p, Msg: err.Error()}
			}
			part, err := decode(p, b, true)
			if err != nil {
				return nil, err
			}
			cfg.Scalers = append(cfg.Scalers, part.Scalers...)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse decodes and validates one document (file names errors).
func Parse(file string, data []byte) (*Config, error) {
	cfg, err := decode(file, data, false)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fragment is the shape of a scalers.d file.
type fragment struct {
	Scalers []*Entry `yaml:"scalers"`
}

func decode(file string, data []byte, frag bool) (*Config, error) {
	cfg := &Config{}
	var err error
	if frag {
		f := &fragment{}
		err = yaml.UnmarshalWithOptions(data, f, yaml.Strict())
		cfg.Scalers = f.Scalers
	} else {
		err = yaml.UnmarshalWithOptions(data, cfg, yaml.Strict())
	}
	if err != nil {
		return nil, &ConfigError{File: file, Msg: yaml.FormatError(err, false, false)}
	}
	if !frag && cfg.Version == 0 && len(strings.TrimSpace(string(data))) == 0 {
		return nil, &ConfigError{File: file, Msg: "empty file"}
	}
	for _, e := range cfg.Scalers {
		if e != nil {
			e.file = file
		}
	}
	if !frag {
		// Top-level errors are reported against the main file.
		cfg.mainFile = file
	}
	return cfg, nil
}

// Limits resolves a label set's limits: label set > defaults > unlimited.
func (c *Config) Limits(ls *LabelSet) Limits {
	var r *Resources
	if ls.Resources != nil {
		r = ls.Resources
	} else if c.Defaults != nil {
		r = c.Defaults.Resources
	}
	var l Limits
	if r == nil {
		return l
	}
	if r.CPUs != nil {
		l.NanoCPUs = int64(math.Round(*r.CPUs * 1e9))
	}
	if r.Memory != nil {
		l.MemoryBytes, _ = ParseMemory(*r.Memory)
	}
	return l
}

// DefaultConfig is the embedded default used when KICI_SCALER_CONFIG_PATH
// is unset: one bare-metal scaler named "local" for the host's platform,
// maxAgents agents (KICI_MAX_AGENTS), with the single label set [local]
// (so a job asking for nothing, for `local`, or only for the host's kici:*
// platform labels matches).
func DefaultConfig(maxAgents int) *Config {
	if maxAgents <= 0 {
		maxAgents = 4
	}
	label := "local"
	c := &Config{
		Version: 1, mainFile: "(embedded default)",
		GlobalMaxAgents: max(DefaultGlobalMaxAgents, maxAgents),
		Scalers: []*Entry{{
			Name: "local", Type: TypeBareMetal, MaxAgents: maxAgents,
			LabelSets: []*LabelSet{{Labels: []string{label}}},
			file:      "(embedded default)",
		}},
	}
	if err := c.validate(); err != nil {
		panic("scaler: embedded default invalid: " + err.Error())
	}
	return c
}

// hostPlatform maps GOOS/GOARCH to KiCI's platform words.
func hostPlatform() Platform {
	p := Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	switch p.OS {
	case "darwin":
		p.OS = "macos"
	}
	switch p.Arch {
	case "amd64":
		p.Arch = "x64"
	}
	return p
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
