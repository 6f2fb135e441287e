package apitypes

import (
	"encoding/json"
	"time"
)

// ProviderGitHub is the provider type of GitHub sources.
const ProviderGitHub = "github"

// CreateGitHubSourceRequest is the body of POST /sources. Either AppID and
// PrivateKey (a GitHub App; its credentials are checked with GET /app) or
// Token (a personal or fine-grained access token) must be given.
type CreateGitHubSourceRequest struct {
	// Provider must be "github".
	Provider string `json:"provider"`
	// OrgID owns the source; it is the first segment of the webhook URL.
	OrgID string `json:"orgId"`
	// Name is unique within the org ([a-z0-9._-], ≤ 100 chars).
	Name string `json:"name"`
	// AppID is the GitHub App id (App sources).
	AppID int64 `json:"appId,omitempty"`
	// PrivateKey is the App's PEM private key (App sources).
	PrivateKey string `json:"privateKey,omitempty"`
	// Token is an access token (token sources).
	Token string `json:"token,omitempty"`
	// WebhookSecret verifies deliveries; generated when empty.
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// APIBaseURL is the REST API root (default https://api.github.com).
	APIBaseURL string `json:"apiBaseUrl,omitempty"`
	// RateLimitRPM caps deliveries per minute (default 600; -1 = unlimited).
	RateLimitRPM int `json:"rateLimitRpm,omitempty"`
}

// SecretView is a webhook secret in listings (never the secret itself).
type SecretView struct {
	ID        string     `json:"id"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// EventLogView is one event-log entry in API answers (KiCI event-log
// fields, KiCI: Logs, DLQ, scheduled jobs, attestations).
type EventLogView struct {
	EventLogEntry
	// RunID is the first run started by the delivery ("" = none).
	RunID          string `json:"runId,omitempty"`
	PayloadOmitted bool   `json:"payloadOmitted"`
}

// EmitRequest is the body of POST /events/emit (KiCI admin-events).
type EmitRequest struct {
	// EventName is matched by kici_event triggers' eventName (required,
	// ≤ 200 printable characters).
	EventName string `json:"eventName"`
	// Payload is a JSON object matched by the triggers' match/not JSONPaths.
	Payload json.RawMessage `json:"payload"`
	// SourceRoutingKey and SourceRepo describe where the event comes from.
	SourceRoutingKey string `json:"sourceRoutingKey,omitempty"`
	SourceRepo       string `json:"sourceRepo,omitempty"`
	// OrgID limits matching to one org's registrations ("" = every org).
	OrgID string `json:"orgId,omitempty"`
}
