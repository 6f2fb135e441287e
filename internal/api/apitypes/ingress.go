package apitypes

import (
	"encoding/json"
	"time"

	"kici.dev/kici/internal/provider"
)

// CreateGitHubSourceRequest is the body of POST /sources. Either AppID and
// PrivateKey (a GitHub App; its credentials are checked with GET /app) or
// Token (a personal or fine-grained access token) must be given.
type CreateGitHubSourceRequest struct {
	// Provider must be "github".
	Provider provider.Name `json:"provider"`
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

// EventLogView is one event-log entry in API answers (KiCI's event-log
// fields; see docs/kici-compatibility.md#ingress).
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

// GitHubSourceCreated is the body of POST /sources (HTTP 201): the new
// source's id, name and routing key ("github:<appId>" for an App,
// "github:token:<id>" for a token source), the path GitHub posts
// deliveries to (WebhookURL, /webhook/<org>/github/<id>) and the source.
type GitHubSourceCreated struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	RoutingKey string     `json:"routingKey"`
	WebhookURL string     `json:"webhookUrl"`
	Source     SourceView `json:"source"`
}

// RotatedSecret is the body of POST /generic-sources/{id}/webhook-secrets
// (HTTP 201): the new secret, in clear this once. The older secrets stay
// active until revoked, so senders can switch over.
type RotatedSecret struct {
	ID            string    `json:"id"`
	WebhookSecret string    `json:"webhookSecret"`
	CreatedAt     time.Time `json:"createdAt"`
}

// RevokedSecret is the body of DELETE
// /generic-sources/{id}/webhook-secrets/{secretId}: Revoked is true, ID
// the revoked secret's id.
type RevokedSecret struct {
	Revoked bool   `json:"revoked"`
	ID      string `json:"id"`
}

// RejectedDeliveryList is the body of GET /rejected-deliveries, newest
// first.
type RejectedDeliveryList struct {
	Rejected []RejectedDelivery `json:"rejected"`
}

// EventLogPage is the body of GET /event-log: one page of entries, newest
// first; Total counts every entry the filter matches, Limit and Offset are
// the page actually served (defaults 50 and 0).
type EventLogPage struct {
	Deliveries []EventLogView `json:"deliveries"`
	Total      int            `json:"total"`
	Limit      int            `json:"limit"`
	Offset     int            `json:"offset"`
}

// EventLogDetail is the body of GET /event-log/{deliveryId}.
type EventLogDetail struct {
	Delivery EventLogView `json:"delivery"`
	// Trace is the delivery's decision trace (a Trace), present once it
	// was processed; ErrorMessage, present with it, is the processing
	// error ("" when none).
	Trace        json.RawMessage `json:"trace,omitempty"`
	ErrorMessage *string         `json:"errorMessage,omitempty"`
	// Payload is the delivery's JSON body, with ?includePayload=true only;
	// PayloadReadError replaces it when the body was not kept or cannot be
	// shown.
	Payload          json.RawMessage `json:"payload,omitempty"`
	PayloadReadError string          `json:"payloadReadError,omitempty"`
}

// EmitResponse is the body of POST /events/emit (HTTP 201): the id of the
// event recorded and submitted (KiCI admin-events).
type EmitResponse struct {
	EventID string `json:"eventId"`
}

// RegistrationList is the body of GET /registrations: every registration
// the filter matches (no paging) and their count.
type RegistrationList struct {
	Registrations []Registration `json:"registrations"`
	Total         int            `json:"total"`
}

// RegistrationEnvelope is the body of GET /registrations/{id}.
type RegistrationEnvelope struct {
	Registration Registration `json:"registration"`
}
