// Package hold names the words of a held run (held_runs.hold_type,
// queue_type, hold_scope, status and reason): the server stores them, the
// API returns them and the CLIs tell them apart, so they live in one leaf
// package every side may import. Each type is a string in JSON and in the
// database.
package hold

// Type is why work is held (KiCI held_runs.hold_type).
type Type string

// Hold types.
const (
	Reviewer    Type = "reviewer"    // required reviewers of a context
	Timer       Type = "timer"       // a context's wait timer
	Concurrency Type = "concurrency" // a context's concurrency limit
	Security    Type = "security"    // fork pull request, or a context's trust floor
)

// Queue is the queue a hold is listed in (KiCI held_runs.queue_type).
type Queue string

// Hold queues.
const (
	QueueContext  Queue = "context"
	QueueSecurity Queue = "security"
)

// Scope says what a hold holds (KiCI held_runs.hold_scope): a
// workflow-scoped hold has no job id and holds every job of its run.
type Scope string

// Hold scopes.
const (
	ScopeWorkflow Scope = "workflow"
	ScopeJob      Scope = "job"
)

// Status is a hold's state (KiCI held_runs.status, plus kici's
// "cancelled" for a hold whose run ended before a decision).
type Status string

// Hold statuses.
const (
	Pending   Status = "pending"
	Approved  Status = "approved"
	Rejected  Status = "rejected"
	Expired   Status = "expired"
	Released  Status = "released" // a wait timer ran out
	Cancelled Status = "cancelled"
)

// Reason is a hold's stored reason: one of the codes below for a security
// hold, else a sentence (e.g. "context 'release' requires approval from
// alice, bob").
type Reason string

// Reason codes of security holds (KiCI hold reasons).
const (
	ReasonForkPR       Reason = "fork_pr"
	ReasonContextTrust Reason = "context_trust"
)
