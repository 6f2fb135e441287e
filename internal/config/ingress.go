package config

import (
	"fmt"
	"strconv"
	"time"
)

// Ingress defaults, KiCI's cluster-settings defaults
// (see docs/kici-compatibility.md#ingress).
const (
	// DefaultMaxGitHubPayloadBytes is KICI_MAX_GITHUB_PAYLOAD_BYTES's default (25 MiB).
	DefaultMaxGitHubPayloadBytes = 26214400
	// DefaultLockFileMaxBytes is KICI_LOCK_FILE_MAX_BYTES's default (5 MiB).
	DefaultLockFileMaxBytes = 5242880
	// DefaultEventLogMaxPayloadBytes is KICI_EVENT_LOG_MAX_PAYLOAD_BYTES's default (5 MiB).
	DefaultEventLogMaxPayloadBytes = 5242880
	// DefaultWebhookDedupTTL is KICI_WEBHOOK_DEDUP_TTL_MS's default (24 h).
	DefaultWebhookDedupTTL = 24 * time.Hour
	// DefaultLibraryRefTTL is KICI_LIBRARY_REF_TTL_MS's default (5 min).
	DefaultLibraryRefTTL = 5 * time.Minute
)

// Ingress are the webhook-ingress and lock-fetching limits.
type Ingress struct {
	// MaxGitHubPayloadBytes caps a GitHub webhook body (413 above it).
	MaxGitHubPayloadBytes int64
	// LockFileMaxBytes caps a lock file fetched from a forge.
	LockFileMaxBytes int64
	// EventLogMaxPayloadBytes caps the payload kept (gzipped) in the event
	// log; larger payloads are recorded as omitted.
	EventLogMaxPayloadBytes int64
	// WebhookDedupTTL is KICI_WEBHOOK_DEDUP_TTL_MS: how long a delivery id
	// is deduplicated (the cluster setting webhook_dedup_ttl_ms overrides
	// it live); 1 s to 365 days.
	WebhookDedupTTL time.Duration
	// AllowLocalSourceURLs is KICI_ALLOW_LOCAL_SOURCE_URLS: forge URLs of
	// sources may reach loopback, link-local and this host's own
	// addresses (internal/netguard); false by default.
	AllowLocalSourceURLs bool
	// LibraryRefTTL is KICI_LIBRARY_REF_TTL_MS: how long the run-time
	// library drift check reuses a library ref's answer
	// (pieces.RefResolver); 1 s to 24 h, default 5 minutes.
	LibraryRefTTL time.Duration
}

// loadIngress parses the ingress variables into in, returning one error per
// malformed value.
func loadIngress(get func(string) string, in *Ingress) []error {
	*in = Ingress{MaxGitHubPayloadBytes: DefaultMaxGitHubPayloadBytes, LockFileMaxBytes: DefaultLockFileMaxBytes,
		EventLogMaxPayloadBytes: DefaultEventLogMaxPayloadBytes, WebhookDedupTTL: DefaultWebhookDedupTTL, LibraryRefTTL: DefaultLibraryRefTTL}
	var errs []error
	parse := func(name string, dst *int64) {
		v := get(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<30 {
			errs = append(errs, fmt.Errorf("%s=%q: must be a number of bytes between 1 and 1073741824", name, v))
			return
		}
		*dst = n
	}
	parse("KICI_MAX_GITHUB_PAYLOAD_BYTES", &in.MaxGitHubPayloadBytes)
	parse("KICI_LOCK_FILE_MAX_BYTES", &in.LockFileMaxBytes)
	parse("KICI_EVENT_LOG_MAX_PAYLOAD_BYTES", &in.EventLogMaxPayloadBytes)
	if v := get("KICI_ALLOW_LOCAL_SOURCE_URLS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("KICI_ALLOW_LOCAL_SOURCE_URLS=%q: must be true or false", v))
		}
		in.AllowLocalSourceURLs = b
	}
	if v := get("KICI_LIBRARY_REF_TTL_MS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1000 || n > int64(24*time.Hour/time.Millisecond) {
			errs = append(errs, fmt.Errorf("KICI_LIBRARY_REF_TTL_MS=%q: must be an integer number of milliseconds between 1000 and 86400000 (24 h)", v))
		} else {
			in.LibraryRefTTL = time.Duration(n) * time.Millisecond
		}
	}
	if v := get("KICI_WEBHOOK_DEDUP_TTL_MS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1000 || n > int64(365*24*time.Hour/time.Millisecond) {
			errs = append(errs, fmt.Errorf("KICI_WEBHOOK_DEDUP_TTL_MS=%q: must be an integer number of milliseconds between 1000 and 31536000000 (365 days)", v))
		} else {
			in.WebhookDedupTTL = time.Duration(n) * time.Millisecond
		}
	}
	return errs
}
