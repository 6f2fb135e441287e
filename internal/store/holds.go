package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"
)

// ApprovalClause is one clause of a hold's approval requirement; the
// admin API serves it as it is.
type ApprovalClause = apitypes.ApprovalClause

// HeldRunApproval is one recorded decision on a hold
// (held_run_approvals); the admin API serves it as it is.
type HeldRunApproval = apitypes.HeldRunApproval

// HeldRun is one hold (KiCI held_runs). ID is a uuid.
type HeldRun struct {
	ID    string `json:"id"`
	OrgID string `json:"orgId"`
	RunID string `json:"runId"`
	// JobID is the held job; "" for a workflow-scoped hold.
	JobID     string      `json:"jobId,omitempty"`
	HoldType  hold.Type   `json:"holdType"`
	QueueType hold.Queue  `json:"queueType"`
	HoldScope hold.Scope  `json:"holdScope"`
	Status    hold.Status `json:"status"`
	// Reason is a stored reason code (fork_pr, context_trust) or a sentence
	// (e.g. "context 'release' requires approval from alice, bob").
	Reason hold.Reason `json:"reason"`
	// Contexts are the names of the contexts that caused the hold (sorted);
	// a pending hold blocks the deletion of each of them.
	Contexts []string `json:"contexts,omitempty"`
	// Group is the context concurrency group a HoldConcurrency hold waits
	// for a slot of ("" for other holds).
	Group string `json:"group,omitempty"`
	// Clauses is the approval requirement (empty: any one approval).
	Clauses []ApprovalClause `json:"clauses"`
	// Approvals are the decisions recorded so far, oldest first.
	Approvals []HeldRunApproval `json:"approvals,omitempty"`
	// ExpiresAt ends a pending hold: a timer hold is released, any other
	// hold expires (its job is cancelled).
	ExpiresAt  time.Time  `json:"expiresAt"`
	CreatedAt  time.Time  `json:"createdAt"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
	// ResolvedBy is the approver or "system" (timer, expiry, run end).
	ResolvedBy string `json:"resolvedBy,omitempty"`
	// ResolveNote is the decision's reason ("" if none).
	ResolveNote string `json:"resolveNote,omitempty"`
}

// HeldRunFilter selects holds for ListHeldRuns. Empty fields do not filter;
// Limit defaults to 100 (max 1000).
type HeldRunFilter struct {
	OrgID    string
	RunID    string
	JobID    string
	Statuses []hold.Status
	// DueBy keeps holds whose ExpiresAt is at or before it.
	DueBy *time.Time
	// HoldType and Group keep holds of that type / concurrency group.
	HoldType hold.Type
	Group    string
	Limit    int
}

// PendingHeldRunsError is returned by ContextStore.DeleteContext while
// pending holds name the context (KiCI ContextDeleteBlockedError).
type PendingHeldRunsError struct {
	Context string
	Count   int
}

// Error says how many pending holds block the deletion (KiCI's message).
func (e *PendingHeldRunsError) Error() string {
	return fmt.Sprintf("Context has %d pending held run(s) — approve or reject them first", e.Count)
}

// IsPendingHeldRuns reports whether err is (or wraps) a PendingHeldRunsError.
func IsPendingHeldRuns(err error) bool {
	var e *PendingHeldRunsError
	return errors.As(err, &e)
}

// PrepareHeldRun fills the fields HoldStore.CreateHeldRun implementations
// write back before inserting h: a new uuid when ID is empty, status
// pending, CreatedAt (at) when zero, a non-nil clause list, and sorted,
// de-duplicated context names.
func PrepareHeldRun(h *HeldRun, at time.Time) {
	if h.ID == "" {
		h.ID = uuid.NewString()
	}
	h.Status = hold.Pending
	if h.CreatedAt.IsZero() {
		h.CreatedAt = at
	}
	if h.Clauses == nil {
		h.Clauses = []ApprovalClause{}
	}
	if len(h.Contexts) > 0 {
		h.Contexts = slices.Compact(slices.Sorted(slices.Values(h.Contexts)))
	}
}

// HoldStore persists holds and their decisions. Status changes are
// conditional (from pending only), so a hold is decided once even under
// concurrent approvals, the sweeper and restarts.
type HoldStore interface {
	// CreateHeldRun inserts h (status pending). For a job-scoped hold it
	// also moves the job from one of jobFrom (nil = any non-terminal
	// status) to StatusHeld with PendingReason "held: <h.Reason>" in the
	// same transaction; when the job (of h.RunID) is not in jobFrom nothing
	// is written and ok is false. It sets h.ID (when empty), h.Status,
	// h.CreatedAt (when zero), h.Clauses (nil becomes empty) and sorts and
	// de-duplicates h.Contexts.
	CreateHeldRun(ctx context.Context, h *HeldRun, jobFrom []status.Job) (ok bool, err error)
	// GetHeldRun returns one hold with its approvals, or ErrNotFound.
	GetHeldRun(ctx context.Context, id string) (*HeldRun, error)
	// ListHeldRuns returns holds matching f with their contexts and
	// approvals, oldest first (created time, then id).
	ListHeldRuns(ctx context.Context, f HeldRunFilter) ([]*HeldRun, error)
	// DecideHeldRun appends a (approval or rejection, may be nil; a zero
	// a.At becomes at) and stores clauses (nil keeps the stored ones, so
	// an expiry does not erase which clauses were satisfied), and when
	// to != "" moves the hold from pending to `to` with resolvedAt/By/Note
	// — all in one transaction, only while the hold is pending. ok=false
	// (nothing written) when it is not pending; ErrNotFound when it does
	// not exist. Clauses are replaced, not merged: callers that compute
	// them from an earlier read serialise decisions on one hold.
	DecideHeldRun(ctx context.Context, id string, a *HeldRunApproval, clauses []ApprovalClause, to hold.Status, by, note string, at time.Time) (ok bool, err error)
	// CountPendingHeldRunsForContext counts pending holds of org naming
	// context name.
	CountPendingHeldRunsForContext(ctx context.Context, orgID, name string) (int, error)
}
