package apitypes

import (
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
)

// Page sizes.
const (
	// DefaultRunLimit is GET /runs's ?limit when it is absent.
	DefaultRunLimit = 20
	// MaxRunLimit is the most runs GET /runs returns; a larger ?limit is
	// lowered to it.
	MaxRunLimit = 100
	// DefaultLogLimit is the logs route's ?limit when it is absent.
	DefaultLogLimit = 500
	// MaxLogLimit is the most lines the logs route returns; a larger ?limit
	// is lowered to it.
	MaxLogLimit = 2000
)

// RunView is a run in API responses. It is not store.Run: the API answers
// null for an unset optional field (KiCI's run shape) where the row omits
// it, and adds ParentRunID, so package api copies the row into it.
type RunView struct {
	RunID          string        `json:"runId"`
	WorkflowName   string        `json:"workflowName"`
	Status         status.Run    `json:"status"`
	Provider       provider.Name `json:"provider"`
	RepoIdentifier string        `json:"repoIdentifier"`
	RepoURL        string        `json:"repoUrl"`
	Ref            string        `json:"ref"`
	SHA            string        `json:"sha"`
	DeliveryID     *string       `json:"deliveryId"`
	SourceID       *string       `json:"sourceId"`
	OrgID          string        `json:"orgId"`
	TriggeredBy    *string       `json:"triggeredBy"`
	FailureReason  *string       `json:"failureReason"`
	TimeoutMs      *int64        `json:"timeoutMs"`
	CreatedAt      time.Time     `json:"createdAt"`
	StartedAt      *time.Time    `json:"startedAt"`
	CompletedAt    *time.Time    `json:"completedAt"`
	DurationMs     *int64        `json:"durationMs"`
	// TriggerType and TargetBranch are the run's context-gate facts;
	// TrustTier is "trusted", "unknown" (a fork pull request) or null (a
	// provider without a fork model); LockFileSource is "base" when the
	// lock was read from the base branch (KiCI run fields).
	TriggerType    *TriggerKind `json:"triggerType"`
	TargetBranch   *string      `json:"targetBranch"`
	TrustTier      *string      `json:"trustTier"`
	LockFileSource *string      `json:"lockFileSource"`
	// WorkflowOrigin is where an organization-wide workflow that made
	// this run was defined ("<repo>@<sha>:<file>"); absent for a run of the
	// repository's own workflow (kici).
	WorkflowOrigin string `json:"workflowOrigin,omitempty"`
	// ParentRunID is the run a rerun repeats (GET /runs/{runId} and the
	// rerun answer only).
	ParentRunID *string `json:"parentRunId,omitempty"`
}

// JobView is a job in API responses. RoutingReason is the pending reason of
// a queued job. Steps is present only with ?includeSteps=true.
// MatrixValues (the job's matrix leg, name → value) is null for a job
// outside a matrix; RunsOnLabels may be null for a job stored without
// labels.
type JobView struct {
	JobID           string            `json:"jobId"`
	RunID           string            `json:"runId"`
	JobName         string            `json:"jobName"`
	BaseJobName     string            `json:"baseJobName"`
	Status          status.Job        `json:"status"`
	MatrixValues    map[string]string `json:"matrixValues" nullable:"true"`
	AgentID         *string           `json:"agentId"`
	StartedAt       *time.Time        `json:"startedAt"`
	CompletedAt     *time.Time        `json:"completedAt"`
	DurationMs      *int64            `json:"durationMs"`
	ErrorMessage    *string           `json:"errorMessage"`
	RoutingReason   *string           `json:"routingReason"`
	RunsOnLabels    []string          `json:"runsOnLabels" nullable:"true"`
	CreatedAt       time.Time         `json:"createdAt"`
	Needs           []Need            `json:"needs"`
	TimeoutMs       *int64            `json:"timeoutMs"`
	LastHeartbeatAt *time.Time        `json:"lastHeartbeatAt"`
	Steps           []StepView        `json:"steps,omitzero"`
	// Outputs are the job's exported outputs (name → value, secrets
	// masked); absent when it exported none.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// StepView is a step in API responses. It is not store.Step: the API
// answers null for an unset optional field where the row omits it, and
// leaves out the row's run and job ids.
type StepView struct {
	StepIndex    int         `json:"stepIndex"`
	StepName     string      `json:"stepName"`
	Status       status.Step `json:"status"`
	ExitCode     *int        `json:"exitCode"`
	ErrorMessage *string     `json:"errorMessage"`
	LogBytes     int64       `json:"logBytes"`
	StartedAt    *time.Time  `json:"startedAt"`
	CompletedAt  *time.Time  `json:"completedAt"`
	DurationMs   *int64      `json:"durationMs"`
}

// LogLineView is one log line: unix-ms timestamp, stream, text.
type LogLineView struct {
	TS     int64  `json:"ts"`
	Stream string `json:"stream"`
	Msg    string `json:"msg"`
}

// LogsPage is the logs route's response. Complete is true when the step (or
// its job) is terminal and this page reached the end of the log.
type LogsPage struct {
	Lines      []LogLineView `json:"lines"`
	NextCursor int           `json:"nextCursor"`
	Complete   bool          `json:"complete"`
}
