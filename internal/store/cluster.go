package store

import (
	"context"
	"time"
)

// ClusterSettingsStore holds the live cluster settings (KiCI's
// cluster_settings; see docs/kici-compatibility.md#clustering): one row per knob
// that has an override; a knob without a row takes its configured default.
// Values are integers (milliseconds or bytes, per knob).
type ClusterSettingsStore interface {
	// GetClusterSettings returns every override by knob name and the
	// settings version (0 before the first change).
	GetClusterSettings(ctx context.Context) (*ClusterSettings, error)
	// PatchClusterSettings sets the knobs of set and deletes those of reset
	// in one transaction, bumping the version only when something changed,
	// and returns the result.
	PatchClusterSettings(ctx context.Context, set map[string]int64, reset []string) (*ClusterSettings, error)
}

// ClusterSettings are the stored overrides.
type ClusterSettings struct {
	// Values holds the overridden knobs by name (e.g. agent_token_ttl_ms).
	Values map[string]int64
	// Version increases on every change that modified a value.
	Version int64
	// UpdatedAt is the time of the last change (zero before any).
	UpdatedAt time.Time
}
