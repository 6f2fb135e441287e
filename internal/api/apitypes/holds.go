package apitypes

import (
	"time"

	"kici.dev/kici/internal/approval/hold"
)

// HeldRunView is one hold in GET /held-runs. JobID and JobName are null for
// a workflow-scoped hold; ResolvedBy and ResolveNote are null while the
// hold is pending; Group (the concurrency group a concurrency hold waits
// for a slot of) is null for every other hold.
type HeldRunView struct {
	ID          string            `json:"id"`
	RunID       string            `json:"runId"`
	JobID       *string           `json:"jobId"`
	JobName     *string           `json:"jobName"`
	HoldType    hold.Type         `json:"holdType"`
	QueueType   hold.Queue        `json:"queueType"`
	Status      hold.Status       `json:"status"`
	HoldScope   hold.Scope        `json:"holdScope"`
	Reason      hold.Reason       `json:"reason"`
	Contexts    []string          `json:"contexts"`
	Group       *string           `json:"group"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	CreatedAt   time.Time         `json:"createdAt"`
	Clauses     []ApprovalClause  `json:"clauses"`
	Approvals   []HeldRunApproval `json:"approvals"`
	ResolvedBy  *string           `json:"resolvedBy"`
	ResolveNote *string           `json:"resolveNote"`
}

// HeldRunDecision is the body of POST /held-runs/decision (approval.Result
// on the server): Status is the hold's state after the decision, pending
// (more clauses must be satisfied; Remaining lists their values),
// released (the held work resumes) or rejected (it is cancelled).
// Remaining is absent when no clause is left. An approver not eligible
// for any open clause gets HTTP 409 {"error", "status": "ineligible"}.
type HeldRunDecision struct {
	Status    hold.Status `json:"status"`
	Remaining []string    `json:"remainingClauses,omitempty"`
}
