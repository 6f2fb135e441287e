package apitypes

import (
	"encoding/json"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
)

// Shapes the server also keeps as rows (store, runctl, ingest, trigger,
// runstream). They are defined here only, and the server's packages alias
// them, so a client decodes them without linking the server and the server
// serves its rows as they are (see the package doc).

// ClusterNode is one orchestrator of the cluster as last reported by its
// heartbeat.
type ClusterNode struct {
	// ID is the node id (<KICI_DATA_DIR>/node-id).
	ID string `json:"id"`
	// Address is the node's base URL.
	Address string `json:"address"`
	// Version is the node's build version.
	Version string `json:"version"`
	// StartedAt is when the node process started.
	StartedAt time.Time `json:"startedAt"`
	// HeartbeatAt is the node's last heartbeat.
	HeartbeatAt time.Time `json:"lastHeartbeatAt"`
	// Draining is the node's drain mode; the node applies it at its next
	// heartbeat.
	Draining bool `json:"draining"`
	// JobsRunning counts jobs the node handed to agents and not finished,
	// as of its last heartbeat.
	JobsRunning int `json:"jobsRunning"`
	// AgentsConnected counts the agents connected to the node, as of its
	// last heartbeat.
	AgentsConnected int `json:"agentsConnected"`
	// ReadsCompressedLogs is whether the node's running process says it
	// reads step-log chunks stored compressed (KICI_STEP_LOG_COMPRESS,
	// docs/logs.md): false for a node of a release before that report
	// (migration node_log_forms), which counts as reading plain chunks
	// only. No node writes compressed chunks while a node that is false
	// heartbeated within membership.PlainOnlyHoldsFor.
	ReadsCompressedLogs bool `json:"readsCompressedLogs"`
}

// ApprovalClause is one clause of an approval requirement (KiCI
// approval_requirement.clauses): Kind "user" with Value a reviewer id.
// Clauses are ANDed; SatisfiedBy is set once an eligible approver approved.
type ApprovalClause struct {
	Kind        string `json:"kind"`
	Value       string `json:"value"`
	SatisfiedBy string `json:"satisfiedBy,omitempty"`
}

// HeldRunApproval is one recorded decision on a hold (KiCI
// held_run_approvals).
type HeldRunApproval struct {
	Approver string `json:"approver"`
	// Decision is "approve" or "reject".
	Decision string `json:"decision"`
	// Clauses lists the clause values this decision satisfied.
	Clauses []string  `json:"clausesSatisfied,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// EventLogEntry is one entry of the event log: every accepted delivery has
// one, every replay of it one more (Status duplicate).
type EventLogEntry struct {
	ID                   string         `json:"id"`
	DeliveryID           string         `json:"deliveryId"`
	OrgID                string         `json:"orgId"`
	SourceID             string         `json:"sourceId,omitempty"`
	RoutingKey           string         `json:"routingKey"`
	Event                string         `json:"event"`
	Action               string         `json:"action,omitempty"`
	Source               string         `json:"source"` // direct | internal
	Provider             provider.Name  `json:"provider"`
	RepoIdentifier       string         `json:"repoIdentifier,omitempty"`
	Ref                  string         `json:"ref,omitempty"`
	Status               EventLogStatus `json:"status"`
	MatchedCount         int            `json:"matchedCount"`
	RunIDs               []string       `json:"runIds,omitempty"`
	ErrorMessage         string         `json:"errorMessage,omitempty"`
	PayloadSizeBytes     int64          `json:"payloadSizeBytes"`
	PayloadHash          string         `json:"payloadHash"` // sha256 hex of the raw body
	PayloadOmittedReason string         `json:"payloadOmittedReason,omitempty"`
	ReceivedAt           time.Time      `json:"receivedAt"`
	ProcessedAt          *time.Time     `json:"processedAt,omitempty"`
}

// Need is one DAG edge: this job waits for Upstream (a job name within the
// run, one matrix leg per edge) and runs only if its terminal status is in
// RunOn.
type Need struct {
	Upstream string       `json:"name"`
	RunOn    []status.Job `json:"runOn"`
}

// GitConfig is the configuration of a universal-git source (KiCI
// git_config; see docs/kici-compatibility.md#ingress).
type GitConfig struct {
	// Preset is forgejo, gitea, gogs, gitlab-repo, github-repo or custom.
	Preset string `json:"preset"`
	// PayloadPaths and EventMapping configure the custom preset.
	PayloadPaths map[string]string `json:"payloadPaths,omitempty"`
	EventMapping map[string]string `json:"eventMapping,omitempty"`
	// GitURLTemplate is the clone URL with {repo} ("owner/name"), {owner}
	// and {name} placeholders, e.g. https://git.example.com/{repo}.git.
	GitURLTemplate string `json:"gitUrlTemplate"`
	// CredentialType is "" (anonymous), pat or basic; the credential is sent
	// as an HTTP Authorization header, never in the URL.
	CredentialType string `json:"credentialType,omitempty"`
	// Username goes with basic (and pat) credentials.
	Username string `json:"username,omitempty"`
	// Credential is the token or password.
	Credential string `json:"credential,omitempty"`
	// APIBaseURL is the forge's web root for commit statuses (Gitea:
	// <root>/api/v1, GitLab: <root>/api/v4), e.g. https://git.example.com;
	// "" = derived from an http(s) GitURLTemplate (the part before {repo}
	// or {owner}).
	APIBaseURL string `json:"apiBaseUrl,omitempty"`
}

// DrainStatus is the orchestrator's drain state (GET/POST
// /orchestrator/drain).
type DrainStatus struct {
	// Draining is true while new jobs stay queued.
	Draining bool `json:"draining"`
	// JobsRunning counts jobs handed to agents and not finished.
	JobsRunning int `json:"jobsRunning"`
}

// RejectedDelivery records a request the ingress refused after finding its
// source (bad signature, over the cap, rate limited, bad headers). The body
// is never kept, only its size and hash.
type RejectedDelivery struct {
	ID               string    `json:"id"`
	SourceID         string    `json:"sourceId"`
	OrgID            string    `json:"orgId"`
	Route            string    `json:"route"` // github | generic
	DeliveryHeader   string    `json:"deliveryHeader,omitempty"`
	Event            string    `json:"event,omitempty"`
	StatusCode       int       `json:"statusCode"`
	Reason           string    `json:"reason"`
	RemoteAddr       string    `json:"remoteAddr,omitempty"`
	PayloadSizeBytes int64     `json:"payloadSizeBytes"`
	PayloadHash      string    `json:"payloadHash,omitempty"`
	ReceivedAt       time.Time `json:"receivedAt"`
}

// Registration is one default-branch workflow that event, schedule and
// lifecycle triggers are matched against (KiCI's registration index;
// see docs/kici-compatibility.md#triggers).
type Registration struct {
	ID             string        `json:"id"`
	OrgID          string        `json:"customerId"`
	SourceID       string        `json:"sourceId"`
	RoutingKey     string        `json:"routingKey"`
	Provider       provider.Name `json:"provider"`
	RepoIdentifier string        `json:"repoIdentifier"`
	RepoURL        string        `json:"repoUrl"`
	Ref            string        `json:"ref"`
	SHA            string        `json:"commitSha"`
	WorkflowName   string        `json:"workflowName"`
	// TriggerTypes are the `_type`s of the workflow's triggers, in order.
	TriggerTypes []string `json:"triggerTypes"`
	// Workflow is the lock workflow entry as JSON.
	Workflow  json.RawMessage `json:"lockEntry"`
	CreatedAt time.Time       `json:"createdAt"`
}

// AccessLogEntry is one access-log row: an admin write, a secret read or a
// secret resolution (KiCI access log audit rows).
type AccessLogEntry struct {
	ID int64 `json:"id"`
	// At is when the action happened (zero = now on insert).
	At time.Time `json:"at"`
	// TokenID and TokenLabel identify the caller ("" for the system).
	TokenID    string `json:"tokenId,omitempty"`
	TokenLabel string `json:"tokenLabel,omitempty"`
	// Role is the caller's role.
	Role string `json:"role,omitempty"`
	// Action names what was done, e.g. "token.create", "secret.set",
	// "secret.resolve".
	Action string `json:"action"`
	// Resource names what it was done to, e.g. "secret:acme:release:npm_token".
	Resource string `json:"resource"`
	// RoutingKey is the routing-key scope of the caller's token, if any.
	RoutingKey string `json:"routingKey,omitempty"`
	// Detail is a short human-readable note (never a secret value).
	Detail string `json:"detail,omitempty"`
}

// Trace is the decision record of a processed delivery (GET
// /event-log/{deliveryId} "trace"; pipeline.Trace on the server).
type Trace struct {
	// Summary is a one-line outcome, e.g. "no lock file at <sha>" or
	// "2 of 3 workflows matched; 2 runs created".
	Summary string `json:"summary"`
	// Event is the delivery's event name; Ref and SHA the pushed ref/commit.
	Event string `json:"event,omitempty"`
	Ref   string `json:"ref,omitempty"`
	SHA   string `json:"sha,omitempty"`
	// ChangedFiles is set when some trigger filters on paths (first 300).
	ChangedFiles []string `json:"changedFiles,omitempty"`
	// Workflows holds one trigger decision per lock workflow, in lock order.
	Workflows []Decision `json:"workflows,omitempty"`
	// Runs lists the runs created for matched workflows.
	Runs []RunRef `json:"runs,omitempty"`
	// Errors lists per-workflow failures (the delivery is then "failed").
	Errors []string `json:"errors,omitempty"`
	// Warnings are what the runs created show without failing, each
	// `workflow "<name>": <text>` (a library ref that moved since the
	// lock was compiled, or one that could not be checked).
	Warnings []string `json:"warnings,omitempty"`
	// LockStatus is set when the lock could not be used: lockfile_missing,
	// lockfile_corrupt or lockfile_too_large.
	LockStatus string `json:"lockStatus,omitempty"`
}

// RunRef is a run a delivery created.
type RunRef struct {
	WorkflowName string `json:"workflowName"`
	RunID        string `json:"runId"`
	Jobs         int    `json:"jobs"`
}

// Decision is the outcome of matching one workflow against one event
// (trigger.Decision on the server).
type Decision struct {
	// Name is the workflow name.
	Name string `json:"name"`
	// Matched reports whether some trigger passed.
	Matched bool `json:"matched"`
	// MatchedTrigger is the 0-based index of the first passing trigger;
	// null when none matched.
	MatchedTrigger *int `json:"matchedTrigger"`
	// Checks is the trace: the winning trigger's checks, or every trigger's
	// checks concatenated when none matched.
	Checks []Check `json:"checks"`
	// Summary is "Matched trigger <n> (<type>)", "No triggers matched" or
	// "No triggers defined".
	Summary string `json:"summary"`
}

// Check is one entry of a decision trace (KiCI decision-trace.ts).
type Check struct {
	// Check names what was compared: "event type", "action", "branch", …
	Check string `json:"check"`
	// Pattern is the filter (multiple patterns joined with "|").
	Pattern string `json:"pattern"`
	// Value is what the event carried ("(missing)" when absent).
	Value string `json:"value"`
	// Passed reports whether the check let the trigger continue.
	Passed bool `json:"passed"`
	// Reason explains a failure (or a pass with no filter).
	Reason string `json:"reason"`
}

// LineEvent is the data of a "line" event of a step's log stream: N is the
// 0-based line offset, TS unix milliseconds, Stream stdout or stderr, Msg
// the text as logged (runstream.LineEvent on the server).
type LineEvent struct {
	N      int    `json:"n"`
	TS     int64  `json:"ts"`
	Stream string `json:"stream"`
	Msg    string `json:"msg"`
}
