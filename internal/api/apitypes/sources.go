package apitypes

import (
	"time"

	"kici.dev/kici/internal/provider"
)

// VerificationConfig configures a generic source's verification method.
type VerificationConfig struct {
	// Header names the signature (hmac_sha256) or token (bearer_token) header.
	Header string `json:"header,omitempty"`
	// IPAllowlist lists the client IPs accepted by ip_allowlist.
	IPAllowlist []string `json:"ipAllowlist,omitempty"`
}

// CreateSourceRequest is the body of POST /generic-sources. Unknown fields are
// rejected.
type CreateSourceRequest struct {
	// OrgID is the owning organisation ([A-Za-z0-9._-], ≤ 100 chars).
	OrgID string `json:"orgId"`
	// Name is unique within the org ([a-z0-9._-], ≤ 100 chars); it is the
	// last segment of the webhook URL.
	Name string `json:"name"`
	// ProviderType is "generic" (default) or "local".
	ProviderType provider.Name `json:"providerType,omitempty"`
	// VerificationMethod is hmac_sha256 (default), bearer_token,
	// ip_allowlist or none.
	VerificationMethod string `json:"verificationMethod,omitempty"`
	// VerificationConfig configures the method (header, ipAllowlist).
	VerificationConfig *VerificationConfig `json:"verificationConfig,omitempty"`
	// MaxPayloadBytes caps delivery bodies (1 B–10 MiB; default 1 MiB).
	MaxPayloadBytes int64 `json:"maxPayloadBytes,omitempty"`
	// RateLimitRPM caps deliveries per minute (default 600; -1 = unlimited).
	RateLimitRPM int `json:"rateLimitRpm,omitempty"`
	// IdempotencyKeyHeader names the request header carrying the delivery's
	// idempotency key (KiCI idempotencyKeyHeader); generic sources only.
	IdempotencyKeyHeader string `json:"idempotencyKeyHeader,omitempty"`
	// IdempotencyKeyPath is a JSONPath to the idempotency key in the body
	// (KiCI idempotencyKeyPath), e.g. $.event.id; generic sources only.
	IdempotencyKeyPath string `json:"idempotencyKeyPath,omitempty"`
	// GitConfig makes a generic source a universal-git source (see
	// docs/ingress.md); generic sources only.
	GitConfig *GitConfig `json:"gitConfig,omitempty"`
	// LocalConfig is required for local sources, refused otherwise.
	LocalConfig *LocalConfig `json:"localConfig,omitempty"`
}

// LocalConfig configures a local source.
type LocalConfig struct {
	// Path is the absolute path of a git repository on the orchestrator host.
	Path string `json:"path"`
}

// SourceView is a source in API responses (never its secret). It is not
// store.Source, which holds the webhook secret and the local path; package
// api copies the served fields and adds the webhook path.
type SourceView struct {
	ID                 string        `json:"id"`
	OrgID              string        `json:"orgId"`
	Name               string        `json:"name"`
	ProviderType       provider.Name `json:"providerType"`
	RoutingKey         string        `json:"routingKey"`
	VerificationMethod string        `json:"verificationMethod"`
	Enabled            bool          `json:"enabled"`
	LocalConfig        *LocalConfig  `json:"localConfig"`
	// WebhookPath is where deliveries are posted: /webhook/<org>/generic/<name>.
	WebhookPath string    `json:"webhookPath"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Source provider types accepted by POST /generic-sources.
const (
	// ProviderGeneric is a plain generic webhook source.
	ProviderGeneric = "generic"
	// ProviderLocal is a git repository on the orchestrator's host.
	ProviderLocal = "local"
)

// SourceWebhookSecret is the body of GET
// /generic-sources/{id}/webhook-secret: the source's routing key and its
// original webhook secret, in clear ("" for a source created without one).
type SourceWebhookSecret struct {
	RoutingKey    string `json:"routingKey"`
	WebhookSecret string `json:"webhookSecret"`
}

// SourceOrgWideWorkflows is the body and the answer of PUT
// /generic-sources/{id}/org-wide-workflows: whether the organization-wide
// workflows of the org's other sources run for this source's events,
// "allow" (the default) or "deny".
type SourceOrgWideWorkflows struct {
	OrgWideWorkflows string `json:"orgWideWorkflows"`
}

// SourceEnabled is the body of POST /generic-sources/{id}/enable and
// /disable: the source's state after the call.
type SourceEnabled struct {
	Enabled bool `json:"enabled"`
}
