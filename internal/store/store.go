// Package store is kici's persistence boundary: one Store interface,
// implemented once over database/sql (store/sqlstore) for SQLite
// (store/sqlite opens it, the embedded default) and PostgreSQL
// (store/postgres opens it). Both run the same conformance suite
// (store/storetest).
//
// Every status change is conditional ("from these statuses to that one") so
// concurrent writers and replayed messages never move a row backwards or
// complete it twice. Times are UTC; durations are milliseconds.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
)

// Errors returned by every implementation.
var (
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a unique key already exists (e.g. a source name in an org,
	// a delivery id).
	ErrConflict = errors.New("store: already exists")
)

// Source is a registered event source. Provider is "local" for a repository
// on the orchestrator's host, "generic" for a plain generic webhook source.
type Source struct {
	ID         string        `json:"id"`
	OrgID      string        `json:"orgId"`
	Name       string        `json:"name"`
	Provider   provider.Name `json:"providerType"`
	RoutingKey string        `json:"routingKey"` // "generic:<orgId>:<id>"
	// LocalPath is the absolute repository path of a local source.
	LocalPath string `json:"localPath,omitempty"`
	// VerificationMethod is hmac_sha256, bearer_token, ip_allowlist or none.
	VerificationMethod string `json:"verificationMethod"`
	// WebhookSecret verifies deliveries; never serialised in API listings.
	WebhookSecret string    `json:"-"`
	Enabled       bool      `json:"enabled"`
	CreatedAt     time.Time `json:"createdAt"`
}

// DeliveryStatus is the state of an accepted delivery (deliveries.status);
// a string in JSON and the database.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryReceived  DeliveryStatus = "received"  // persisted, not processed yet
	DeliveryProcessed DeliveryStatus = "processed" // runs created (possibly none)
	DeliveryFailed    DeliveryStatus = "failed"    // processing failed; Error says why
)

// Delivery is one accepted inbound event, persisted before the 2xx answer so
// nothing accepted is lost. ID is "<routingKey>:<rawId>"; unique.
type Delivery struct {
	ID       string          `json:"deliveryId"`
	SourceID string          `json:"sourceId"`
	OrgID    string          `json:"orgId"`
	Event    string          `json:"event"`
	Payload  json.RawMessage `json:"payload"`
	Status   DeliveryStatus  `json:"status"`
	Error    string          `json:"error,omitempty"`
	// Decisions is the trigger-match trace per workflow, as JSON.
	Decisions   json.RawMessage `json:"decisions,omitempty"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	ProcessedAt *time.Time      `json:"processedAt,omitempty"`
	// ClaimedBy and ClaimExpiresAt, when ClaimedBy is set on a delivery
	// being inserted, store it already claimed by that holder until that
	// time, as ClaimDelivery would (store.DeliveryClaimStore): the node
	// that accepts a webhook processes it without a claim of its own.
	// Reads leave them empty.
	ClaimedBy      string    `json:"-"`
	ClaimExpiresAt time.Time `json:"-"`
}

// Run is one workflow run (execution_runs). Status uses KiCI's run words:
// pending, running, cancelling, held, success, failed, cancelled.
type Run struct {
	ID             string        `json:"runId"`
	WorkflowName   string        `json:"workflowName"`
	Status         status.Run    `json:"status"`
	Provider       provider.Name `json:"provider"`
	RepoIdentifier string        `json:"repoIdentifier"`
	RepoURL        string        `json:"repoUrl"`
	Ref            string        `json:"ref"`
	SHA            string        `json:"sha"`
	DeliveryID     string        `json:"deliveryId,omitempty"`
	SourceID       string        `json:"sourceId,omitempty"`
	OrgID          string        `json:"orgId"`
	TriggeredBy    string        `json:"triggeredBy,omitempty"`
	FailureReason  string        `json:"failureReason,omitempty"`
	// TimeoutMs is the whole-run wall-clock limit (0 = none).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// TriggerType is the matched trigger's type (push, pull_request,
	// manual, schedule, …; "" when unknown).
	TriggerType apitypes.TriggerKind `json:"triggerType,omitempty"`
	// TargetBranch is the branch a run targets: the pushed branch, or a
	// pull request's base branch ("" for tags and internal triggers).
	TargetBranch string `json:"targetBranch,omitempty"`
	// TrustTier is TrustTrusted, TrustUnknown (fork pull request) or ""
	// (a provider without a fork model).
	TrustTier string `json:"trustTier,omitempty"`
	// LockFileSource is "base" when the lock file was read from the base
	// branch rather than the triggering ref, else "".
	LockFileSource string `json:"lockFileSource,omitempty"`
	// WorkflowOrigin says where an organization-wide workflow that made
	// this run in another source was defined: "<repo>@<sha>:<file>" (the
	// defining source's registered lock); "" for the repository's own.
	WorkflowOrigin string     `json:"workflowOrigin,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	StartedAt      *time.Time `json:"startedAt,omitempty"`
	CompletedAt    *time.Time `json:"completedAt,omitempty"`
	DurationMs     *int64     `json:"durationMs,omitempty"`
}

// Need is one DAG edge of a job (jobs.needs); the admin API serves it
// as it is.
type Need = apitypes.Need

// Job is one job (one matrix leg) of a run (execution_jobs). Status uses
// KiCI's job words: pending, queued, running, recovering, cancelling,
// success, failed, cancelled, skipped, timed_out_stale, drift_dropped.
type Job struct {
	ID           string            `json:"jobId"`
	RunID        string            `json:"runId"`
	JobName      string            `json:"jobName"` // leg name, e.g. "test (1.22, linux)"
	BaseJobName  string            `json:"baseJobName"`
	MatrixValues map[string]string `json:"matrixValues,omitempty"`
	Status       status.Job        `json:"status"`
	AgentID      string            `json:"agentId,omitempty"`
	// Config is the lock job entry (with this leg's matrix) as JSON.
	Config       json.RawMessage `json:"-"`
	RunsOnLabels []string        `json:"runsOnLabels"`
	Needs        []Need          `json:"needs"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	// PendingReason says why a queued job is waiting (e.g. "no agent online").
	PendingReason string `json:"routingReason,omitempty"`
	// TimeoutMs is the job wall-clock limit (0 = none).
	TimeoutMs       int64      `json:"timeoutMs,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
	StartedAt       *time.Time `json:"startedAt,omitempty"`
	CompletedAt     *time.Time `json:"completedAt,omitempty"`
	DurationMs      *int64     `json:"durationMs,omitempty"`
	LastHeartbeatAt *time.Time `json:"lastHeartbeatAt,omitempty"`
}

// Step is one step row (execution_steps), created when the agent first
// reports it. Status: pending, running, success, failed, skipped, cancelled.
type Step struct {
	RunID        string      `json:"runId"`
	JobID        string      `json:"jobId"`
	StepIndex    int         `json:"stepIndex"`
	StepName     string      `json:"stepName"`
	Status       status.Step `json:"status"`
	ExitCode     *int        `json:"exitCode,omitempty"`
	ErrorMessage string      `json:"errorMessage,omitempty"`
	LogBytes     int64       `json:"logBytes"`
	StartedAt    *time.Time  `json:"startedAt,omitempty"`
	CompletedAt  *time.Time  `json:"completedAt,omitempty"`
	DurationMs   *int64      `json:"durationMs,omitempty"`
}

// Queue entry statuses (dispatch_queue.status).
const (
	QueuePending    = "pending"
	QueueDispatched = "dispatched"
	QueueCompleted  = "completed"
	QueueFailed     = "failed"
	QueueExpired    = "expired"
)

// QueueEntry is a job waiting for, or handed to, an agent (dispatch_queue).
// ID equals the job id.
type QueueEntry struct {
	ID            string     `json:"id"`
	RunID         string     `json:"runId"`
	JobName       string     `json:"jobName"`
	RunsOnLabels  []string   `json:"runsOnLabels"`
	ExcludeLabels []string   `json:"excludeLabels,omitempty"`
	Status        string     `json:"status"`
	AgentID       string     `json:"agentId,omitempty"`
	Attempts      int        `json:"dispatchAttempts"`
	AckDeadline   *time.Time `json:"ackDeadline,omitempty"`
	// PinnedAgentID restricts the entry to one agent (a scaler-spawned agent
	// bound to this job).
	PinnedAgentID string    `json:"pinnedAgentId,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// AgentTokenKind is the kind of an agent token; apitypes', as the admin
// API serves it.
type AgentTokenKind = apitypes.AgentTokenKind

// Agent token kinds, apitypes' constants.
const (
	AgentTokenStatic    = apitypes.AgentTokenStatic
	AgentTokenEphemeral = apitypes.AgentTokenEphemeral
)

// AgentToken is an agent pre-shared key. Only the SHA-256 hash of the
// plaintext ("kat_" + 64 hex) is stored, with a 12-char display prefix.
// An ephemeral token is bound to one agent id (BoundAgentID).
type AgentToken struct {
	ID           string         `json:"id"`
	TokenHash    string         `json:"-"`
	Prefix       string         `json:"tokenPrefix"`
	Kind         AgentTokenKind `json:"agentType"`
	BoundAgentID string         `json:"createdBy,omitempty"`
	Labels       []string       `json:"labels,omitempty"`
	ExpiresAt    *time.Time     `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time     `json:"revokedAt,omitempty"`
	CreatedAt    time.Time      `json:"createdAt"`

	// MandatoryLabels (KiCI mandatory_labels, a taint) are only written by
	// SecurityStore.CreateAgentTokenAudited and read with
	// SecurityStore.AgentTokenMandatoryLabels.
	MandatoryLabels []string `json:"mandatoryLabels,omitempty"`
}

// AgentSession is the durable record of an agent id's current session
// on a single node (table agent_sessions), so that an orchestrator restart
// does not forget which process holds the id: the token it registered with
// and the SHA-256 of the resume token it was given (the token itself lives
// only in the agent's memory). A cluster keeps the same table through
// internal/agentsessions.
type AgentSession struct {
	AgentID    string
	TokenID    string
	ResumeHash []byte
}

// AdminToken is an admin API bearer token. Role is owner, admin or auditor.
// Only the SHA-256 hash of the plaintext is stored.
type AdminToken struct {
	ID        string     `json:"id"`
	Label     string     `json:"label"`
	Role      string     `json:"role"`
	TokenHash string     `json:"-"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Revoked   bool       `json:"revoked"`
	CreatedAt time.Time  `json:"createdAt"`
	// RoutingKey is the token's routing-key scope ("" = every source), as
	// read back; it is set on creation by CreateAdminTokenAudited only, and
	// the API shows it from ListAdminTokenRoutingKeys.
	RoutingKey string `json:"-"`
}

// RunFilter selects runs for ListRuns. Empty fields do not filter. Statuses
// is an OR list. Limit defaults to 20 and is capped at 100 by callers.
type RunFilter struct {
	Statuses     []status.Run
	WorkflowName string
	Repo         string
	DeliveryID   string
	Since        *time.Time // strictly later created_at
	Limit        int
	Offset       int

	// RoutingKey keeps only runs of sources with that routing key (the
	// scope of a routing-key-scoped admin token).
	RoutingKey string
	// SourceID keeps runs of one source; TriggerType runs of one trigger
	// type (push, pull_request, …); Branch runs whose target branch, or
	// whose refs/heads/ ref, is that branch.
	SourceID    string
	TriggerType apitypes.TriggerKind
	Branch      string
}

// JobUpdate carries the optional fields written with a job status change.
// Nil pointers leave the column untouched.
type JobUpdate struct {
	AgentID       *string
	ErrorMessage  *string
	PendingReason *string
	StartedAt     *time.Time
	// StartedAtIfUnset sets started_at only when the job has none (a
	// start reported again, after a reconnect, keeps the first); StartedAt
	// wins over it.
	StartedAtIfUnset *time.Time
	CompletedAt      *time.Time
	DurationMs       *int64
	LastHeartbeatAt  *time.Time
}

// RunUpdate carries the optional fields written with a run status change.
// FailureReason is only written when the stored one is empty (never clobber).
type RunUpdate struct {
	FailureReason *string
	StartedAt     *time.Time
	CompletedAt   *time.Time
	DurationMs    *int64
}

// Store is everything kici persists. Implementations are safe for concurrent
// use. Methods return ErrNotFound / ErrConflict as documented, other errors
// for I/O failures.
type Store interface {
	// Close releases the database handle.
	Close() error
	// ProvenanceStore: signing keys and attestation bundles (provenance.go).
	ProvenanceStore
	// RunControlStore: concurrency group entries (runs_control.go).
	RunControlStore
	// IngressStore: source settings/secrets, event log, registrations (ingress.go).
	IngressStore
	// DeliveryClaimStore: one node at a time processes a delivery (claims.go).
	DeliveryClaimStore
	// ClusterSettingsStore: live cluster settings (cluster.go).
	ClusterSettingsStore
	// SecurityStore: token scopes, secrets, access log (security.go).
	SecurityStore
	// ContextStore: contexts, bindings, variables (contexts.go).
	ContextStore
	// HoldStore: held runs and approvals (holds.go).
	HoldStore
	// TrustStore: trust policy and approval directory (trust.go).
	TrustStore
	// BlobIndexStore: cache and artifact index, job credentials (blobs.go).
	BlobIndexStore
	// WorkflowDataStore: job outputs and run contexts (workflows.go).
	WorkflowDataStore
	// CheckRunStore: check runs and commit statuses posted to forges (checkruns.go).
	CheckRunStore
	// RetentionStore: bounded sweeps of expired history (retention.go).
	RetentionStore
	// ScheduleStore: lease release and schedule instants fired (schedules.go).
	ScheduleStore
	// NodeStore: the node registry, heartbeats and drain (nodes.go).
	NodeStore
	// NotificationStore: notification subscriptions and outbox (notifications.go).
	NotificationStore
	// WebSessionStore: the web UI's sessions (websessions.go).
	WebSessionStore

	// --- sources ---

	// CreateSource inserts a source; ErrConflict when (OrgID, Name) exists.
	CreateSource(ctx context.Context, s *Source) error
	// GetSource returns a source by id, or ErrNotFound.
	GetSource(ctx context.Context, id string) (*Source, error)
	// GetSourceByName returns the source named name in org, or ErrNotFound.
	GetSourceByName(ctx context.Context, orgID, name string) (*Source, error)
	// ListSources returns all sources (orgID "" = every org), oldest first.
	ListSources(ctx context.Context, orgID string) ([]*Source, error)

	// --- deliveries ---

	// InsertDelivery persists a delivery with status received; ErrConflict if
	// its ID exists (the duplicate is reported, nothing changes).
	InsertDelivery(ctx context.Context, d *Delivery) error
	// GetDelivery returns a delivery by id, or ErrNotFound.
	GetDelivery(ctx context.Context, id string) (*Delivery, error)
	// FinishDelivery sets status (processed or failed), error text, decision
	// trace and processed_at, and clears the delivery's claim.
	FinishDelivery(ctx context.Context, id string, status DeliveryStatus, errText string, decisions json.RawMessage) error
	// ListUnprocessedDeliveries returns deliveries still "received", oldest
	// first (re-processed at start after a crash).
	ListUnprocessedDeliveries(ctx context.Context, limit int) ([]*Delivery, error)
	// CountUnprocessedDeliveries returns how many deliveries are still
	// "received" and when the oldest of them was received (nil when none),
	// for the pending-deliveries metric; one indexed query.
	CountUnprocessedDeliveries(ctx context.Context) (int, *time.Time, error)

	// --- runs, jobs, steps ---

	// CreateRun inserts a run with its jobs (and their needs) in one
	// transaction; either all rows exist afterwards or none.
	CreateRun(ctx context.Context, run *Run, jobs []*Job) error
	// GetRun returns a run by id, or ErrNotFound.
	GetRun(ctx context.Context, id string) (*Run, error)
	// ListRuns returns runs matching f, newest first, and the total count of
	// matches ignoring Limit/Offset.
	ListRuns(ctx context.Context, f RunFilter) ([]*Run, int, error)
	// UpdateRunStatus moves a run to `to` only if its status is in `from`
	// (nil from = any non-terminal status). Reports whether a row changed.
	UpdateRunStatus(ctx context.Context, id string, from []status.Run, to status.Run, u RunUpdate) (bool, error)
	// MoveRun is UpdateRunStatus that returns the run as the change left
	// it (nil when no row changed), so a caller that hands the row on need
	// not read it back.
	MoveRun(ctx context.Context, id string, from []status.Run, to status.Run, u RunUpdate) (*Run, error)

	// GetJob returns a job by id, or ErrNotFound.
	GetJob(ctx context.Context, id string) (*Job, error)
	// ListJobs returns a run's jobs in creation order.
	ListJobs(ctx context.Context, runID string) ([]*Job, error)
	// ListJobsByStatus returns jobs in any of the statuses, oldest first
	// (used for recovery at start).
	ListJobsByStatus(ctx context.Context, statuses []status.Job) ([]*Job, error)
	// UpdateJobStatus moves a job to `to` only if its status is in `from`
	// (nil from = any non-terminal status). Reports whether a row changed.
	UpdateJobStatus(ctx context.Context, id string, from []status.Job, to status.Job, u JobUpdate) (bool, error)
	// MoveJob is UpdateJobStatus that returns the job as the change left
	// it (nil when no row changed), so a caller that goes on with the row
	// need not read it back.
	MoveJob(ctx context.Context, id string, from []status.Job, to status.Job, u JobUpdate) (*Job, error)
	// ReleaseJob moves a pending job to queued and stores its dispatch
	// queue entry e (Enqueue's defaults apply) atomically, in one
	// statement on PostgreSQL: the job as the change left it, and whether
	// e was stored (false when an entry with its id existed, which is left
	// as it is). nil, false, nil when the job was not pending: nothing is
	// written.
	ReleaseJob(ctx context.Context, id string, e *QueueEntry) (*Job, bool, error)
	// StartJob moves a job to running from any status a start leaves
	// (status.JobsMovingTo(JobRunning)), writing the non-nil fields of u,
	// and, when the job moved, its run to running from any status that
	// can move there, with startedAt runStarted (UTC) where the run has no
	// start time yet. The two writes are atomic: one statement on
	// PostgreSQL, one transaction on SQLite. It returns the job as the
	// change left it, or nil, nil when the job did not move (unknown,
	// already running, or in a status a start does not leave): nothing is
	// written then.
	StartJob(ctx context.Context, id string, u JobUpdate, runStarted time.Time) (*Job, error)
	// SetPendingReasons writes many jobs' pending reasons at once (job id
	// → reason): a reason on a job still queued, and "" (the reason
	// cleared) on a job in any status. Ids of no job, or of a job no longer
	// queued for a non-empty reason, are skipped without error. The
	// dispatcher writes its routing reasons this way, behind routing.
	SetPendingReasons(ctx context.Context, reasons map[string]string) error
	// TouchJobHeartbeat sets last_heartbeat_at=at for a running job.
	TouchJobHeartbeat(ctx context.Context, id string, at time.Time) error

	// UpsertStep inserts or updates the step row keyed by (JobID, StepIndex).
	// A terminal step status is never overwritten by a non-terminal one.
	UpsertStep(ctx context.Context, s *Step) error
	// ListSteps returns a job's steps by index.
	ListSteps(ctx context.Context, jobID string) ([]*Step, error)

	// --- dispatch queue ---

	// Enqueue inserts a pending entry; ErrConflict if the id exists.
	Enqueue(ctx context.Context, e *QueueEntry) error
	// ClaimNext atomically claims the oldest pending entry an agent with
	// `labels` may take (its RunsOnLabels ⊆ labels, no ExcludeLabels in
	// labels, PinnedAgentID empty or agentID), marks it dispatched to agentID
	// with ackDeadline, and returns it; (nil, nil) when nothing fits. Two
	// concurrent claimants never get the same entry.
	ClaimNext(ctx context.Context, agentID string, labels []string, ackDeadline time.Time) (*QueueEntry, error)
	// ClaimByID claims one specific pending entry for agentID; (nil, nil) if
	// it is no longer pending.
	ClaimByID(ctx context.Context, id, agentID string, ackDeadline time.Time) (*QueueEntry, error)
	// AckQueueEntry clears the ack deadline of a dispatched entry.
	AckQueueEntry(ctx context.Context, id, agentID string) error
	// RequeueEntry moves a dispatched entry back to pending and increments
	// Attempts; reports the new attempt count, or ok=false if not dispatched.
	RequeueEntry(ctx context.Context, id string) (attempts int, ok bool, err error)
	// SetQueueStatus moves an entry to `to` if its status is in `from`.
	SetQueueStatus(ctx context.Context, id string, from []string, to string) (bool, error)
	// ListQueue returns entries in the given statuses (all if empty), oldest first.
	ListQueue(ctx context.Context, statuses []string) ([]*QueueEntry, error)
	// GetQueueEntry returns the entry of job id (any status), or ErrNotFound.
	GetQueueEntry(ctx context.Context, id string) (*QueueEntry, error)
	// PinQueueEntry sets (or clears with "") the pinned agent of a pending entry.
	PinQueueEntry(ctx context.Context, id, agentID string) error

	// --- tokens ---

	// CreateAgentToken inserts an agent token.
	CreateAgentToken(ctx context.Context, t *AgentToken) error
	// GetAgentTokenByHash returns the token with that SHA-256 hex hash, or
	// ErrNotFound. Validity (revoked/expired) is the caller's check.
	GetAgentTokenByHash(ctx context.Context, hash string) (*AgentToken, error)
	// RevokeAgentToken sets revoked_at; ErrNotFound if the id is unknown.
	RevokeAgentToken(ctx context.Context, id string, at time.Time) error
	// ListAgentTokens returns all agent tokens, newest first.
	ListAgentTokens(ctx context.Context) ([]*AgentToken, error)

	// PutAgentSession records (or replaces) the session of s.AgentID.
	PutAgentSession(ctx context.Context, s *AgentSession) error
	// GetAgentSession returns the session of agentID, or ErrNotFound.
	GetAgentSession(ctx context.Context, agentID string) (*AgentSession, error)
	// DeleteAgentSession forgets agentID's session if it was opened with
	// tokenID (nothing else, and no error, otherwise).
	DeleteAgentSession(ctx context.Context, agentID, tokenID string) error

	// CreateAdminToken inserts an admin token.
	CreateAdminToken(ctx context.Context, t *AdminToken) error
	// GetAdminTokenByHash returns the admin token with that hash, or ErrNotFound.
	GetAdminTokenByHash(ctx context.Context, hash string) (*AdminToken, error)
	// ListAdminTokens returns all admin tokens, newest first.
	ListAdminTokens(ctx context.Context) ([]*AdminToken, error)
	// RevokeAdminToken marks a token revoked; ErrNotFound if unknown.
	RevokeAdminToken(ctx context.Context, id string) error
}

// TerminalJobStatuses are the job statuses that never change again, as
// words for SQL arguments (status.TerminalJobs).
var TerminalJobStatuses = status.Strings(status.TerminalJobs())

// TerminalRunStatuses are the run statuses that never change again, as
// words for SQL arguments (status.TerminalRuns).
var TerminalRunStatuses = status.Strings(status.TerminalRuns())

// TerminalStepStatuses are the step statuses a later non-terminal report
// (e.g. a replayed "running") never overwrites, as words for SQL arguments
// (status.TerminalSteps).
var TerminalStepStatuses = status.Strings(status.TerminalSteps())

// TerminalQueueStatuses are the dispatch_queue statuses that never change
// again (KiCI's terminal queue statuses).
var TerminalQueueStatuses = []string{QueueCompleted, QueueFailed, QueueExpired}

// PageLimit is the row limit of a list query: def when requested <= 0,
// else requested, capped at maxRows when maxRows > 0.
func PageLimit(requested, def, maxRows int) int {
	if requested <= 0 {
		return def
	}
	if maxRows > 0 {
		return min(requested, maxRows)
	}
	return requested
}
