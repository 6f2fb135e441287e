package store

import (
	"context"
	"encoding/json"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
)

// EventLogStatus is the outcome recorded on an event-log entry
// (event_log.status); the admin API serves it, so it is apitypes'.
type EventLogStatus = apitypes.EventLogStatus

// Event-log statuses (KiCI's event_log.status; see
// docs/kici-compatibility.md#ingress); apitypes' constants under the
// store's names.
const (
	EventLogReceived        = apitypes.EventLogReceived        // persisted, not processed yet
	EventLogProcessed       = apitypes.EventLogProcessed       // matched (possibly no workflow)
	EventLogDuplicate       = apitypes.EventLogDuplicate       // a replay of an accepted delivery
	EventLogLockfileMissing = apitypes.EventLogLockfileMissing // no lock file at the event ref
	EventLogFailed          = apitypes.EventLogFailed          // processing failed; ErrorMessage says why
)

// EventLogStatuses lists every event-log status, for filter validation.
var EventLogStatuses = []EventLogStatus{EventLogReceived, EventLogProcessed, EventLogDuplicate, EventLogLockfileMissing, EventLogFailed, EventLogMissed}

// SourceSettings are the ingress settings of a source that the sources
// table does not hold: body cap, rate limit, verification details and the
// provider configuration (GitHub App or token). One row per source.
type SourceSettings struct {
	SourceID string `json:"sourceId"`
	// MaxPayloadBytes caps a delivery body (0 = the route default).
	MaxPayloadBytes int64 `json:"maxPayloadBytes,omitempty"`
	// RateLimitRPM caps accepted requests per minute (0 = the default 600;
	// -1 = unlimited).
	RateLimitRPM int `json:"rateLimitRpm,omitempty"`
	// SignatureHeader names the HMAC header of a generic source
	// ("" = X-Kici-Signature-256, then X-Hub-Signature-256).
	SignatureHeader string `json:"signatureHeader,omitempty"`
	// TokenHeader names the bearer-token header ("" = Authorization, value
	// "Bearer <token>").
	TokenHeader string `json:"tokenHeader,omitempty"`
	// IPAllowlist holds the exact client IPs accepted by ip_allowlist.
	IPAllowlist []string `json:"ipAllowlist,omitempty"`
	// IdempotencyKeyHeader names a request header whose value is the
	// delivery's idempotency key (KiCI idempotencyKeyHeader). When set, the
	// key replaces X-Kici-Delivery as the delivery id, and a request without
	// it is refused.
	IdempotencyKeyHeader string `json:"idempotencyKeyHeader,omitempty"`
	// IdempotencyKeyPath is a JSONPath into the body whose (string or
	// number) value is the idempotency key (KiCI idempotencyKeyPath); used
	// when IdempotencyKeyHeader is empty.
	IdempotencyKeyPath string `json:"idempotencyKeyPath,omitempty"`
	// GitHub configures a github source.
	GitHub *GitHubConfig `json:"github,omitempty"`
	// Git configures a universal-git source (a generic source whose
	// deliveries come from a git forge; its lock is fetched with git).
	Git *GitConfig `json:"git,omitempty"`
	// OrgWideWorkflows is the operator's choice whether the
	// organization-wide workflows of the org's other sources run for this
	// source's events: OrgWideAllow ("" reads as allow) or OrgWideDeny.
	OrgWideWorkflows string `json:"orgWideWorkflows,omitempty"`
	// UpdatedAt is set by the store.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Values of SourceSettings.OrgWideWorkflows.
const (
	// OrgWideAllow lets organization-wide workflows run for the source
	// (the default).
	OrgWideAllow = "allow"
	// OrgWideDeny keeps every organization-wide workflow of another
	// source from running for the source.
	OrgWideDeny = "deny"
)

// GitHubConfig is the provider configuration of a github source: a GitHub
// App (AppID + PrivateKeyPEM; installation tokens are minted per event from
// the payload's installation.id) or a fixed token.
type GitHubConfig struct {
	// APIBaseURL is the REST API root ("" = https://api.github.com).
	APIBaseURL string `json:"apiBaseUrl,omitempty"`
	// AppID is the GitHub App id (App sources only).
	AppID int64 `json:"appId,omitempty"`
	// PrivateKeyPEM is the App's RSA private key (App sources only).
	PrivateKeyPEM string `json:"privateKey,omitempty"`
	// Token is a personal or fine-grained access token (token sources only).
	Token string `json:"token,omitempty"`
}

// GitConfig is the configuration of a universal-git source; the admin
// API serves it as it is.
type GitConfig = apitypes.GitConfig

// SourceSecret is one webhook secret of a source. Every secret whose
// RevokedAt is nil is active: a delivery signed with any of them passes,
// so a secret can be rotated without losing deliveries.
type SourceSecret struct {
	ID        string     `json:"id"`
	SourceID  string     `json:"sourceId"`
	Secret    string     `json:"-"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// EventLogEntry is one row of the event log: every accepted delivery has
// one (Duplicate false), every replay of it one more (Status duplicate).
// The payload is stored gzipped and never served: this is why the row is
// not apitypes.EventLogEntry, which package api copies it into without it.
type EventLogEntry struct {
	ID             string         `json:"id"`
	DeliveryID     string         `json:"deliveryId"`
	OrgID          string         `json:"orgId"`
	SourceID       string         `json:"sourceId,omitempty"`
	RoutingKey     string         `json:"routingKey"`
	Event          string         `json:"event"`
	Action         string         `json:"action,omitempty"`
	Source         string         `json:"source"` // direct | internal
	Provider       provider.Name  `json:"provider"`
	RepoIdentifier string         `json:"repoIdentifier,omitempty"`
	Ref            string         `json:"ref,omitempty"`
	Status         EventLogStatus `json:"status"`
	MatchedCount   int            `json:"matchedCount"`
	RunIDs         []string       `json:"runIds,omitempty"`
	ErrorMessage   string         `json:"errorMessage,omitempty"`
	// PayloadGz is the gzipped raw body (nil when omitted).
	PayloadGz            []byte     `json:"-"`
	PayloadSizeBytes     int64      `json:"payloadSizeBytes"`
	PayloadHash          string     `json:"payloadHash"` // sha256 hex of the raw body
	PayloadOmittedReason string     `json:"payloadOmittedReason,omitempty"`
	ReceivedAt           time.Time  `json:"receivedAt"`
	ProcessedAt          *time.Time `json:"processedAt,omitempty"`
}

// EventOutcome is what processing a delivery decided, written to the
// delivery and its event-log entry in one transaction.
type EventOutcome struct {
	// Status is an EventLog* status (processed, lockfile_missing, failed).
	Status         EventLogStatus
	MatchedCount   int
	RunIDs         []string
	RepoIdentifier string
	Ref            string
	Action         string
}

// EventLogFilter selects event-log rows. Empty fields do not filter.
// DeliveryID is a substring match. Limit defaults to 50 (max 200).
type EventLogFilter struct {
	OrgID      string
	RoutingKey string
	Event      string
	Action     string
	Status     EventLogStatus
	DeliveryID string
	From, To   *time.Time
	Limit      int
	Offset     int
}

// RejectedDelivery records a request the ingress refused after finding
// its source; the admin API serves it as it is.
type RejectedDelivery = apitypes.RejectedDelivery

// MaxRejectedPerSource is how many rejected-delivery records are kept per
// source (newest first; records sharing the cut-off millisecond are all
// kept): refused requests cannot grow the store unbounded.
const MaxRejectedPerSource = 1000

// Registration is one default-branch workflow of the registration index;
// the admin API serves it as it is.
type Registration = apitypes.Registration

// RegistrationFilter selects registrations. Empty fields do not filter.
type RegistrationFilter struct {
	OrgID          string
	RoutingKey     string
	RepoIdentifier string
	TriggerType    string
}

// IngressSource is what a webhook route reads of a source before it takes
// a delivery: the source, its settings and its webhook secrets, as of one
// statement (nothing of it is cached: a disabled source or a revoked
// secret is seen by the next delivery).
type IngressSource struct {
	// Source is the source itself.
	Source *Source
	// Settings are the source's settings; nil when it has none.
	Settings *SourceSettings
	// Secrets are every webhook secret of the source, revoked ones
	// included, oldest first (ListSourceSecrets with activeOnly false).
	Secrets []*SourceSecret
	// SecretsErr, when not nil, is why Secrets could not be given (a
	// sealed value no key opens) and Secrets is nil. It is not returned
	// as the look-up's error because a route that does not verify with
	// secrets, or refuses the delivery first (a disabled source), never
	// needed them.
	SecretsErr error
}

// IngressStore persists ingress state: source settings and secrets, the
// event log, rejected deliveries, registrations and leases.
type IngressStore interface {
	// CreateSourceWithSettings inserts a source, its settings and (when
	// secrets is non-empty) its webhook secrets in one transaction;
	// ErrConflict when (OrgID, Name) or the id exists.
	CreateSourceWithSettings(ctx context.Context, src *Source, set *SourceSettings, secrets []*SourceSecret) error
	// PutSourceSettings inserts or replaces a source's settings.
	PutSourceSettings(ctx context.Context, set *SourceSettings) error
	// GetSourceSettings returns a source's settings, or ErrNotFound.
	GetSourceSettings(ctx context.Context, sourceID string) (*SourceSettings, error)
	// GetIngressSource returns source id with its settings and all its
	// webhook secrets, read in one statement (the webhook routes' look-up,
	// one round trip instead of three); ErrNotFound for an unknown id.
	GetIngressSource(ctx context.Context, id string) (*IngressSource, error)
	// GetIngressSourceByName is GetIngressSource for the source named
	// name in org; ErrNotFound when there is none.
	GetIngressSourceByName(ctx context.Context, orgID, name string) (*IngressSource, error)
	// AddSourceSecret inserts a webhook secret; ErrConflict if its id exists.
	AddSourceSecret(ctx context.Context, sec *SourceSecret) error
	// ListSourceSecrets returns a source's secrets (only unrevoked ones when
	// activeOnly), oldest first.
	ListSourceSecrets(ctx context.Context, sourceID string, activeOnly bool) ([]*SourceSecret, error)
	// RevokeSourceSecret sets revoked_at; ErrNotFound when no active secret
	// has that id.
	RevokeSourceSecret(ctx context.Context, sourceID, secretID string, at time.Time) error
	// SetSourceWebhookSecret replaces the stored webhook_secret of source
	// id (re-encryption at rest); ErrNotFound for an unknown source.
	SetSourceWebhookSecret(ctx context.Context, id, stored string) error
	// SetSourceSecretValue replaces the stored value of webhook secret
	// secretID (re-encryption at rest), revoked or not; ErrNotFound when
	// none has that id.
	SetSourceSecretValue(ctx context.Context, secretID, stored string) error
	// SetSourceEnabled pauses (false) or resumes (true) a source; ErrNotFound
	// for an unknown id. A disabled source keeps everything it owns, but its
	// webhook routes refuse deliveries and its registrations fire nothing
	// (KiCI generic-source enable/disable).
	SetSourceEnabled(ctx context.Context, id string, enabled bool) error
	// DeleteSource removes a source and everything keyed only by it (its
	// settings, webhook secrets, registrations, and the context overrides of
	// its routing key when no other source shares that key), and writes
	// audit, in one transaction; ErrNotFound for an unknown id (nothing is
	// written). History stays: deliveries, the event log, rejected
	// deliveries, runs and jobs keep the deleted source's id.
	DeleteSource(ctx context.Context, id string, audit *AccessLogEntry) error

	// AcceptDelivery inserts the delivery (status received) and its event-log
	// entry in one transaction. ErrConflict when the delivery id exists, in
	// which case nothing is written.
	AcceptDelivery(ctx context.Context, d *Delivery, e *EventLogEntry) error
	// RecordDuplicate inserts an event-log entry with status duplicate.
	RecordDuplicate(ctx context.Context, e *EventLogEntry) error
	// FinishDeliveryOutcome does FinishDelivery and updates the delivery's
	// event-log entry from o in one transaction, and clears the delivery's
	// claim; ErrNotFound if the delivery does not exist, ErrConflict
	// (nothing written) if it is no longer "received": another node
	// finished it.
	FinishDeliveryOutcome(ctx context.Context, id string, status DeliveryStatus, errText string, decisions json.RawMessage, o EventOutcome) error
	// FinishDeliveryWithRuns is FinishDeliveryOutcome that also creates the
	// delivery's runs (each run with its jobs, as CreateRun, and its
	// context when not nil, as PutRunContext) in the same transaction, so
	// a delivery is finished if and only if its runs exist, once: a
	// failure anywhere (ErrConflict on a duplicate run or job id or a
	// delivery already finished, ErrNotFound for an unknown delivery)
	// leaves nothing written. CreateRun's defaults are
	// written back to the runs and jobs.
	FinishDeliveryWithRuns(ctx context.Context, id string, status DeliveryStatus, errText string, decisions json.RawMessage, o EventOutcome, runs []NewRun) error
	// FinishDeliveries is FinishDeliveryWithRuns for several deliveries in
	// one transaction, so that deliveries finished at the same moment share
	// one commit (ingest groups them). All or nothing: when any delivery is
	// no longer "received" or does not exist the error wraps ErrConflict;
	// on that or any other error nothing is written, and a caller finishes
	// the deliveries one by one to learn each one's answer.
	FinishDeliveries(ctx context.Context, fs []DeliveryFinish) error
	// ListEventLog returns matching entries newest first and the total count.
	ListEventLog(ctx context.Context, f EventLogFilter) ([]*EventLogEntry, int, error)
	// GetEventLog returns the primary (non-duplicate) entry of a delivery
	// (orgID "" = any org), or ErrNotFound.
	GetEventLog(ctx context.Context, orgID, deliveryID string) (*EventLogEntry, error)

	// RecordRejected inserts a rejected-delivery record and drops the
	// source's oldest records beyond MaxRejectedPerSource.
	RecordRejected(ctx context.Context, r *RejectedDelivery) error
	// ListRejected returns a source's rejected deliveries (sourceID "" =
	// all), newest first, at most limit (≤ 0 = 100).
	ListRejected(ctx context.Context, sourceID string, limit int) ([]*RejectedDelivery, error)

	// ReplaceRegistrations atomically replaces every registration of
	// (sourceID, repoIdentifier) with regs.
	ReplaceRegistrations(ctx context.Context, sourceID, repoIdentifier string, regs []*Registration) error
	// ListRegistrations returns matching registrations, oldest first.
	ListRegistrations(ctx context.Context, f RegistrationFilter) ([]*Registration, error)
	// HasRegistrations reports whether ListRegistrations(f) would return
	// any registration, reading none: whether an internal event of a kind
	// could start anything at all.
	HasRegistrations(ctx context.Context, f RegistrationFilter) (bool, error)
	// GetRegistration returns a registration by id, or ErrNotFound.
	GetRegistration(ctx context.Context, id string) (*Registration, error)

	// AcquireLease takes or renews the named lease for holder until now+ttl.
	// It succeeds when the lease is free, expired or already held by holder;
	// two holders never hold it at once.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// DeliveryFinish is one delivery's outcome for FinishDeliveries: the
// arguments of FinishDeliveryWithRuns.
type DeliveryFinish struct {
	// ID is the delivery's id.
	ID string
	// Status is the delivery's final status (processed or failed).
	Status DeliveryStatus
	// Error is the processing error ("" when processed).
	Error string
	// Decisions is the processing trace (JSON).
	Decisions json.RawMessage
	// Outcome updates the delivery's event-log entry.
	Outcome EventOutcome
	// Runs are created with it (none for a delivery that matched nothing).
	Runs []NewRun
}

// NewRun is a run to create with FinishDeliveryWithRuns: the run, its jobs
// in creation order and its context (nil for none).
type NewRun struct {
	Run     *Run
	Jobs    []*Job
	Context *RunContext
}
