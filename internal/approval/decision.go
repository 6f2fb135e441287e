// Package approval decides and resumes held work: approvals and rejections
// of holds (required reviewers, fork pull requests, trust floors), wait
// timers, and the sweeper that expires holds nobody decided in time.
package approval

import (
	"errors"

	"kici.dev/kici/internal/api/apitypes"
)

// DecisionWord is what an approver decides on a hold: Approve or Reject
// (KiCI POST /api/v1/admin/held-runs/decision `decision`, see
// docs/kici-compatibility.md#approvals-and-trust-policy).
type DecisionWord string

// Decision words.
const (
	// Approve satisfies the approver's open clauses of the hold.
	Approve DecisionWord = "approve"
	// Reject rejects the hold: its held work is cancelled.
	Reject DecisionWord = "reject"
)

// Decision is one approve/reject request on a hold (KiCI POST
// /api/v1/admin/held-runs/decision).
type Decision struct {
	OrgID     string
	HeldRunID string
	// Decision is Approve or Reject.
	Decision DecisionWord
	// Reason is the approver's note (optional, at most 1 KiB).
	Reason string
	// Approver is the subject recorded for the decision, e.g.
	// "service:<tokenId>" or a directory user id.
	Approver string
	// Operator marks a decision by an admin token acting as itself (no
	// directory identity): it satisfies every open clause and may end a
	// wait timer early. A directory member (Operator false) acts only on
	// the clauses naming its user id.
	Operator bool
	// Actor describes the caller for the access log (token id and label,
	// or a comment author).
	ActorTokenID, ActorTokenLabel, ActorRole string
}

// Result is the state of a hold after a decision (pending, released or
// rejected); the admin API serves it as it is.
type Result = apitypes.HeldRunDecision

// Errors of Decide.
var (
	// ErrNotFound: no such hold in the org, or it is no longer pending
	// (KiCI answers 404 for both).
	ErrNotFound = errors.New("held run not found or already resolved")
	// ErrIneligible: the approver may not satisfy any open clause (or
	// triggered the run while self-approval is off).
	ErrIneligible = errors.New("approver is not eligible for this hold")
	// ErrBadDecision: the decision word is neither approve nor reject.
	ErrBadDecision = errors.New(`decision must be "approve" or "reject"`)
)
