// Package cluster holds the live cluster settings (KiCI's cluster_settings;
// see docs/kici-compatibility.md#clustering): integer knobs that an operator
// changes at run time through PATCH /api/v1/admin/cluster-settings, stored
// in the database (store.ClusterSettingsStore) and read by every component
// through a Reader that caches them for a short TTL.
//
// Reading a knob (for other packages):
//
//	r := deps.ClusterSettings            // *cluster.Reader, built once by the orchestrator
//	ttl := r.Duration(ctx, cluster.AgentTokenTTLMs)   // ms knob as a time.Duration
//	max := r.Int(ctx, cluster.MaxGithubPayloadBytes)  // byte knob as int64
//
// Both never fail: a knob without an override, or a database read error,
// yields the configured default (the error is logged and the defaults are
// cached for the TTL, KiCI behaviour).
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// Knob names (the database column / KiCI column name).
const (
	AgentTokenTTLMs       = "agent_token_ttl_ms"
	MaxGithubPayloadBytes = "max_github_payload_bytes"
	LockFileMaxBytes      = "lock_file_max_bytes"
	WebhookDedupTTLMs     = "webhook_dedup_ttl_ms"
	QueueTimeoutMs        = "queue_timeout_ms"
	DispatchAckTimeoutMs  = "dispatch_ack_timeout_ms"
	ScalerSpawnTimeoutMs  = "scaler_spawn_timeout_ms"
	// CheckRunTrackingTTLDays is how many days check_run_tracking rows
	// are kept after their last update (0 = never swept).
	CheckRunTrackingTTLDays = "check_run_tracking_ttl_days"
	// Job caches and artifacts (KiCI org settings of the same wire
	// names; kici keeps them cluster-wide, applied per org).
	UserCacheQuotaBytes = "user_cache_quota_bytes"
	UserCacheTTLMs      = "user_cache_ttl_ms"
	ArtifactQuotaBytes  = "artifact_quota_bytes"
	ArtifactTTLMs       = "artifact_ttl_ms"
	ArtifactMaxBytes    = "artifact_max_bytes"
	ArtifactMaxPerRun   = "artifact_max_per_run"
	// GlobalWorkflowsEnabled switches organization-wide workflows on (1)
	// or off (0, the default): KiCI's global_workflows_enabled.
	GlobalWorkflowsEnabled = "global_workflows_enabled"
	// PublicBadges makes the web UI's status badges
	// (/ui/badge/{source}/{workflow}.svg) readable without signing in (1)
	// or only by a signed-in caller allowed to read the runs (0, the
	// default).
	PublicBadges = "public_badges"
)

// Knob describes one cluster setting.
type Knob struct {
	// Name is the column name (agent_token_ttl_ms).
	Name string
	// Wire is the JSON field name in the API (agentTokenTtlMs, KiCI).
	Wire string
	// Min and Max bound a value (inclusive).
	Min, Max int64
	// Env is the variable that sets its default.
	Env string
	// Help says what it controls and who reads it.
	Help string
}

const day = int64(24 * time.Hour / time.Millisecond)

// Knobs lists every cluster setting, in API order.
var Knobs = []Knob{
	{AgentTokenTTLMs, "agentTokenTtlMs", 1000, 30 * day, "KICI_AGENT_TOKEN_TTL_MS", "lifetime of each scaler-spawned agent's ephemeral token, read on every spawn"},
	{MaxGithubPayloadBytes, "maxGithubPayloadBytes", 1024, 1 << 30, "KICI_MAX_GITHUB_PAYLOAD_BYTES", "body cap of a GitHub webhook request, in bytes"},
	{LockFileMaxBytes, "lockFileMaxBytes", 1024, 1 << 30, "KICI_LOCK_FILE_MAX_BYTES", "size cap of a fetched lock file, in bytes"},
	{WebhookDedupTTLMs, "webhookDedupTtlMs", 1000, 365 * day, "KICI_WEBHOOK_DEDUP_TTL_MS", "how long a webhook delivery id is remembered for deduplication"},
	{QueueTimeoutMs, "queueTimeoutMs", 0, 30 * day, "KICI_QUEUE_TIMEOUT_MS", "how long a job may wait in the queue (0 = indefinitely)"},
	{DispatchAckTimeoutMs, "dispatchAckTimeoutMs", 1000, 3600 * 1000, "KICI_DISPATCH_ACK_TIMEOUT_MS", "how long an agent has to acknowledge a dispatch"},
	{ScalerSpawnTimeoutMs, "scalerSpawnTimeoutMs", 1000, 3600 * 1000, "KICI_SCALER_SPAWN_TIMEOUT_MS", "deadline of one scaler backend spawn (image pull, create, start), read on every spawn"},
	{CheckRunTrackingTTLDays, "checkRunTrackingTtlDays", 0, 3650, "KICI_CHECK_RUN_TRACKING_TTL_DAYS", "days a check run / commit status tracking row is kept after its last update (0 = kept forever), read by the hourly sweep"},
	{UserCacheQuotaBytes, "userCacheQuotaBytes", 1024, 1 << 40, "", "job cache bytes an org may keep; saving past it evicts the least recently used caches"},
	{UserCacheTTLMs, "userCacheTtlMs", 1000, 365 * day, "", "how long a job cache unused by any job is kept"},
	{ArtifactQuotaBytes, "artifactQuotaBytes", 1024, 1 << 40, "", "artifact bytes an org may keep; an upload past it is refused"},
	{ArtifactTTLMs, "artifactTtlMs", 1000, 365 * day, "", "how long an artifact is kept after its upload"},
	{ArtifactMaxBytes, "artifactMaxBytes", 1024, 1 << 40, "", "size cap of one artifact (compressed), enforced while it streams"},
	{ArtifactMaxPerRun, "artifactMaxPerRun", 1, 10000, "", "how many artifacts one run may upload"},
	{GlobalWorkflowsEnabled, "globalWorkflowsEnabled", 0, 1, "", "1 runs organization-wide workflows (a workflow with `repos` on a trigger) for the other sources of their org; 0 (default) does not, read on every delivery"},
	{PublicBadges, "publicBadges", 0, 1, "", "1 serves the web UI's status badges (/ui/badge/{source}/{workflow}.svg) to anyone; 0 (default) only to a signed-in caller who may read the runs"},
}

// KnobByName finds a knob by column or wire name.
func KnobByName(name string) (Knob, bool) {
	for _, k := range Knobs {
		if k.Name == name || k.Wire == name {
			return k, true
		}
	}
	return Knob{}, false
}

// Defaults are the configured (environment) values of the knobs, by Name.
type Defaults map[string]int64

// DefaultValues are the built-in defaults (KiCI): token TTL 1 h, GitHub
// payload 25 MiB, lock file 5 MiB, dedup 24 h, queue timeout 1 h, dispatch
// ack 10 s, spawn timeout 300 s, check-run tracking 7 days; user caches
// 5 GiB for 7 days; artifacts 20 GiB for 30 days, 1 GiB each, 50 per run.
func DefaultValues() Defaults {
	return Defaults{
		AgentTokenTTLMs: 3_600_000, MaxGithubPayloadBytes: 26_214_400, LockFileMaxBytes: 5_242_880,
		WebhookDedupTTLMs: 86_400_000, QueueTimeoutMs: 3_600_000, DispatchAckTimeoutMs: 10_000, ScalerSpawnTimeoutMs: 300_000,
		CheckRunTrackingTTLDays: 7,
		UserCacheQuotaBytes:     5 << 30, UserCacheTTLMs: 7 * day,
		ArtifactQuotaBytes: 20 << 30, ArtifactTTLMs: 30 * day, ArtifactMaxBytes: 1 << 30, ArtifactMaxPerRun: 50,
		GlobalWorkflowsEnabled: 0, PublicBadges: 0,
	}
}

// DefaultCacheTTL is how long a Reader serves its cached copy
// (KICI_CLUSTER_SETTINGS_CACHE_TTL_MS default, KiCI).
const DefaultCacheTTL = 10 * time.Second

// Reader reads the cluster settings with a per-process cache. Safe for
// concurrent use.
type Reader struct {
	st       store.ClusterSettingsStore
	defaults Defaults
	ttl      time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	cached  map[string]int64
	version int64
	at      time.Time
}

// NewReader returns a Reader over st. defaults fill knobs without an
// override (missing entries take DefaultValues); ttl ≤ 0 means
// DefaultCacheTTL.
func NewReader(st store.ClusterSettingsStore, defaults Defaults, ttl time.Duration, logger *slog.Logger) *Reader {
	d := DefaultValues()
	for k, v := range defaults {
		d[k] = v
	}
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{st: st, defaults: d, ttl: ttl, log: logger}
}

// Int returns the effective value of knob name (override, else default),
// from the cache when it is younger than the TTL. Unknown names yield 0.
func (r *Reader) Int(ctx context.Context, name string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cached == nil || time.Since(r.at) > r.ttl {
		r.refreshLocked(ctx)
	}
	if v, ok := r.cached[name]; ok {
		return v
	}
	return r.defaults[name]
}

// Duration is Int for a millisecond knob.
func (r *Reader) Duration(ctx context.Context, name string) time.Duration {
	return time.Duration(r.Int(ctx, name)) * time.Millisecond
}

// AgentTokenTTL is the live agent_token_ttl_ms (scaler.Settings).
func (r *Reader) AgentTokenTTL(ctx context.Context) time.Duration {
	return r.Duration(ctx, AgentTokenTTLMs)
}

// ScalerSpawnTimeout is the live scaler_spawn_timeout_ms (scaler.Settings).
func (r *Reader) ScalerSpawnTimeout(ctx context.Context) time.Duration {
	return r.Duration(ctx, ScalerSpawnTimeoutMs)
}

func (r *Reader) refreshLocked(ctx context.Context) {
	cs, err := r.st.GetClusterSettings(ctx)
	r.at = time.Now()
	if err != nil {
		r.log.Warn("cluster settings unreadable; using defaults", "err", err)
		r.cached = map[string]int64{}
		return
	}
	r.cached = cs.Values
	r.version = cs.Version
}

// Invalidate drops the cache; the next read goes to the database.
func (r *Reader) Invalidate() {
	r.mu.Lock()
	r.cached = nil
	r.mu.Unlock()
}

// View is the API shape of the settings (GET and PATCH answers); the
// admin API serves it as it is.
type View = apitypes.ClusterSettingsView

// View reads the settings from the database (uncached).
func (r *Reader) View(ctx context.Context) (*View, error) {
	cs, err := r.st.GetClusterSettings(ctx)
	if err != nil {
		return nil, err
	}
	return r.view(cs), nil
}

func (r *Reader) view(cs *store.ClusterSettings) *View {
	v := &View{Settings: map[string]*int64{}, Effective: map[string]int64{}, Defaults: map[string]int64{}, Version: cs.Version}
	for _, k := range Knobs {
		v.Defaults[k.Wire] = r.defaults[k.Name]
		v.Effective[k.Wire] = r.defaults[k.Name]
		v.Settings[k.Wire] = nil
		if x, ok := cs.Values[k.Name]; ok {
			x := x
			v.Settings[k.Wire] = &x
			v.Effective[k.Wire] = x
		}
	}
	if !cs.UpdatedAt.IsZero() {
		t := cs.UpdatedAt
		v.UpdatedAt = &t
	}
	return v
}

// PatchError is a rejected PATCH body; nothing was changed.
type PatchError struct{ Msg string }

func (e *PatchError) Error() string { return e.Msg }

// Patch applies a PATCH body: a JSON object whose fields are knob wire
// names; a number sets the knob (within its bounds), null resets it to its
// default. Unknown fields, non-integers and out-of-range values are refused
// with a *PatchError and nothing changes. The local cache is invalidated.
func (r *Reader) Patch(ctx context.Context, body []byte) (*View, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, &PatchError{"body must be a JSON object of cluster settings"}
	}
	if dec.More() {
		return nil, &PatchError{"body must hold a single JSON object"}
	}
	if len(raw) == 0 {
		return nil, &PatchError{"body names no setting; known settings: " + wireNames()}
	}
	set := map[string]int64{}
	var reset []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, field := range keys {
		k, ok := KnobByName(field)
		if !ok || k.Wire != field {
			return nil, &PatchError{fmt.Sprintf("unknown setting %q; known settings: %s", field, wireNames())}
		}
		val := bytes.TrimSpace(raw[field])
		if string(val) == "null" {
			reset = append(reset, k.Name)
			continue
		}
		var n json.Number
		if len(val) == 0 || val[0] == '"' {
			return nil, &PatchError{fmt.Sprintf("%s: must be an integer or null", field)}
		}
		if err := json.Unmarshal(val, &n); err != nil {
			return nil, &PatchError{fmt.Sprintf("%s: must be an integer or null", field)}
		}
		x, err := n.Int64()
		if err != nil {
			return nil, &PatchError{fmt.Sprintf("%s: must be an integer or null (got %s)", field, val)}
		}
		if x < k.Min || x > k.Max {
			return nil, &PatchError{fmt.Sprintf("%s: %d is out of range [%d, %d]", field, x, k.Min, k.Max)}
		}
		set[k.Name] = x
	}
	cs, err := r.st.PatchClusterSettings(ctx, set, reset)
	if err != nil {
		return nil, err
	}
	r.Invalidate()
	return r.view(cs), nil
}

func wireNames() string {
	n := make([]string, 0, len(Knobs))
	for _, k := range Knobs {
		n = append(n, k.Wire)
	}
	return strings.Join(n, ", ")
}
