package scalerconfig

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Backend types accepted in scalers.yaml (KiCI `type`).
const (
	TypeBareMetal = "bare-metal"
	TypeContainer = "container"
)

// DefaultGlobalMaxAgents is globalMaxAgents when the file omits it (KiCI).
const DefaultGlobalMaxAgents = 50

// DefaultMaxConcurrentSpawns is a scaler's maxConcurrentSpawns when unset
// (KiCI DEFAULT_MAX_CONCURRENT_SPAWNS).
const DefaultMaxConcurrentSpawns = 8

// Config is a validated scalers.yaml (plus scalers.d/*.yaml),
// KiCI: Top-level schema Load and Parse return
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
	// Type is bare-metal, container or firecracker. It cannot change on reload.
	Type string `yaml:"type" json:"type"`
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

// Platform is a scaler's os/arch (KiCI: os linux|macos|windows, arch
// x64|arm64).
type Platform struct {
	OS   string `yaml:"os" json:"os"`
	Arch string `yaml:"arch" json:"arch"`
}

// LabelSet is one agent shape (KiCI labelSetConfigSchema).
type LabelSet struct {
	// Labels are the agent's routing labels: lower-cased, no kici: prefix.
	Labels []string `yaml:"labels" json:"labels"`
	// Image (container, required) is the agent image.
	Image string `yaml:"image" json:"image,omitempty"`
	// ImagePullPolicy (container) is Always, IfNotPresent (default) or Never.
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
	labelRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:+-]{0,127}$`)
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

func (c *Config) validate() error {
	top := func(field, format string, a ...any) error {
		return &ConfigError{File: c.mainFile, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if c.Version != 1 {
		return top("version", "must be 1 (got %d)", c.Version)
	}
	if c.GlobalMaxAgents == 0 {
		c.GlobalMaxAgents = DefaultGlobalMaxAgents
	}
	if c.GlobalMaxAgents < 0 {
		return top("globalMaxAgents", "must be a positive integer")
	}
	if c.Defaults != nil && c.Defaults.Resources != nil {
		if err := checkResources(c.Defaults.Resources); err != nil {
			return top("defaults.resources", "%v", err)
		}
	}
	if len(c.Scalers) == 0 {
		return top("scalers", "at least one scaler is required")
	}
	seen := map[string]bool{}
	for i, e := range c.Scalers {
		if e == nil {
			return top(fmt.Sprintf("scalers[%d]", i), "empty entry")
		}
		if err := e.validate(i); err != nil {
			return err
		}
		if seen[e.Name] {
			return &ConfigError{File: e.file, Field: fmt.Sprintf("scalers[%d].name", i), Msg: fmt.Sprintf("duplicate scaler name %q", e.Name)}
		}
		seen[e.Name] = true
	}
	if err := c.validateFirecrackerNetwork(); err != nil {
		return err
	}
	return c.checkOverlaps()
}

func (e *Entry) validate(i int) error {
	p := fmt.Sprintf("scalers[%d]", i)
	bad := func(field, format string, a ...any) error {
		return &ConfigError{File: e.file, Field: p + field, Msg: fmt.Sprintf(format, a...)}
	}
	if !nameRe.MatchString(e.Name) {
		return bad(".name", "invalid scaler name %q: want 1–63 characters of a-z, 0-9 and -, starting and ending with a letter or digit", e.Name)
	}
	switch e.Type {
	case TypeBareMetal, TypeContainer, TypeFirecracker:
	case "":
		return bad(".type", "required (bare-metal, container or firecracker)")
	default:
		return bad(".type", "unsupported type %q (this build has bare-metal, container and firecracker)", e.Type)
	}
	if e.MaxAgents <= 0 {
		return bad(".maxAgents", "required: a positive integer")
	}
	if e.MaxConcurrentSpawns == 0 {
		e.MaxConcurrentSpawns = DefaultMaxConcurrentSpawns
	}
	if e.MaxConcurrentSpawns < 0 {
		return bad(".maxConcurrentSpawns", "must be a positive integer")
	}
	if e.Platform != nil {
		switch e.Platform.OS {
		case "linux", "macos", "windows":
		default:
			return bad(".platform.os", "must be linux, macos or windows (got %q)", e.Platform.OS)
		}
		switch e.Platform.Arch {
		case "x64", "arm64":
		default:
			return bad(".platform.arch", "must be x64 or arm64 (got %q)", e.Platform.Arch)
		}
	}
	if e.Roles != nil {
		for j, r := range *e.Roles {
			switch r {
			case "all", "builder", "init-runner":
			default:
				return bad(fmt.Sprintf(".roles[%d]", j), "must be all, builder or init-runner (got %q)", r)
			}
		}
	}
	for j, l := range e.MandatoryLabels {
		l = strings.ToLower(strings.TrimSpace(l))
		if err := checkLabel(l); err != nil {
			return bad(fmt.Sprintf(".mandatoryLabels[%d]", j), "%v", err)
		}
		e.MandatoryLabels[j] = l
	}
	if e.OrchestratorURL != "" {
		u, err := url.Parse(e.OrchestratorURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return bad(".orchestratorUrl", "must be a ws:// or wss:// URL with a host (got %q)", e.OrchestratorURL)
		}
	}
	if wp := e.WarmPool; wp != nil {
		if wp.Size < 0 || wp.Size > e.MaxAgents {
			return bad(".warmPool.size", "must be between 0 and maxAgents (%d)", e.MaxAgents)
		}
		if wp.IdleTimeoutSeconds == 0 {
			wp.IdleTimeoutSeconds = 300
		}
		if wp.IdleTimeoutSeconds < 0 {
			return bad(".warmPool.idleTimeoutSeconds", "must be a positive number of seconds")
		}
	}
	if e.EnforceCgroups && e.Type != TypeBareMetal {
		return bad(".enforceCgroups", "applies to bare-metal scalers only")
	}
	if e.SocketPath != "" {
		if e.Type != TypeContainer {
			return bad(".socketPath", "applies to container scalers only")
		}
		if !filepath.IsAbs(e.SocketPath) {
			return bad(".socketPath", "must be an absolute path")
		}
	}
	if len(e.LabelSets) == 0 {
		return bad(".labelSets", "at least one label set is required")
	}
	if err := e.validateFirecracker(p); err != nil {
		return err
	}
	for j, ls := range e.LabelSets {
		lp := fmt.Sprintf(".labelSets[%d]", j)
		if ls == nil {
			return bad(lp, "empty label set")
		}
		if len(ls.Labels) == 0 {
			return bad(lp+".labels", "at least one label is required")
		}
		for k, l := range ls.Labels {
			l = strings.ToLower(strings.TrimSpace(l))
			if err := checkLabel(l); err != nil {
				return bad(fmt.Sprintf("%s.labels[%d]", lp, k), "%v", err)
			}
			ls.Labels[k] = l
		}
		for _, g := range e.MandatoryLabels {
			if !contains(ls.Labels, g) {
				return bad(lp+".labels", "must contain mandatory label %q", g)
			}
		}
		switch e.Type {
		case TypeContainer:
			if ls.Image == "" {
				return bad(lp+".image", "required for container scalers")
			}
			if ls.BinaryPath != "" {
				return bad(lp+".binaryPath", "applies to bare-metal scalers only")
			}
			switch ls.ImagePullPolicy {
			case "":
				ls.ImagePullPolicy = "IfNotPresent"
			case "Always", "IfNotPresent", "Never":
			default:
				return bad(lp+".imagePullPolicy", "must be Always, IfNotPresent or Never (got %q)", ls.ImagePullPolicy)
			}
		case TypeBareMetal:
			if ls.Image != "" {
				return bad(lp+".image", "container mode of bare-metal scalers is not available in this build; use a container scaler")
			}
			if ls.ImagePullPolicy != "" {
				return bad(lp+".imagePullPolicy", "applies to container scalers only")
			}
			if ls.BinaryPath != "" && !filepath.IsAbs(ls.BinaryPath) {
				return bad(lp+".binaryPath", "must be an absolute path")
			}
		}
		if ls.Resources != nil {
			if err := checkResources(ls.Resources); err != nil {
				return bad(lp+".resources", "%v", err)
			}
		}
		for k := range ls.Env {
			if !envRe.MatchString(k) {
				return bad(lp+".env", "invalid variable name %q", k)
			}
			if strings.HasPrefix(strings.ToUpper(k), "KICI_") {
				return bad(lp+".env", "%s: KICI_* variables are set by the scaler and cannot be overridden", k)
			}
		}
	}
	return nil
}

func checkLabel(l string) error {
	if strings.HasPrefix(l, "kici:") {
		return fmt.Errorf("label %q uses the reserved kici: prefix", l)
	}
	if !labelRe.MatchString(l) {
		return fmt.Errorf("invalid label %q: want 1–128 characters of a-z, 0-9 and . _ / : + -, starting with a letter or digit", l)
	}
	return nil
}

func checkResources(r *Resources) error {
	if r.CPUs != nil && (*r.CPUs <= 0 || *r.CPUs > 256 || math.IsNaN(*r.CPUs)) {
		return fmt.Errorf("cpus must be > 0 and ≤ 256")
	}
	if r.Memory != nil {
		if _, err := ParseMemory(*r.Memory); err != nil {
			return err
		}
	}
	return nil
}

// checkOverlaps refuses two label sets (of different scalers, or of one)
// with identical canonical labels and gates: routing between them would be
// arbitrary (KiCI reload stage 2, cross-scaler overlap detection).
func (c *Config) checkOverlaps() error {
	seen := map[string]string{}
	for i, e := range c.Scalers {
		for j, ls := range e.LabelSets {
			key := strings.Join(sortedCopy(ls.Labels), ",") + "|" + strings.Join(sortedCopy(e.gate(ls)), ",")
			where := fmt.Sprintf("scalers[%d].labelSets[%d]", i, j)
			if prev, ok := seen[key]; ok {
				return &ConfigError{File: e.file, Field: where + ".labels", Msg: fmt.Sprintf("same labels and gate as %s: routing between them would be ambiguous", prev)}
			}
			seen[key] = where
		}
	}
	return nil
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
