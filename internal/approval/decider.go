package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/store"
)

// MaxReasonBytes caps a decision's reason.
const MaxReasonBytes = 1024

// ServicePrefix starts the approver subject recorded for an operator
// decision made with an admin token ("service:<tokenId>"). Directory user
// ids may not start with it.
const ServicePrefix = "service:"

// Decider validates and commits decisions on holds. It only writes the
// decision; the orchestrator's Resumer then releases or cancels the held
// jobs (also when the decision was written by another process, e.g.
// kici-admin working directly on the database).
type Decider struct {
	st   store.Store
	kick func()
	now  func() time.Time
	// mu serialises decisions: a decision replaces the hold's clause
	// list it computed from its own read, so two concurrent partial
	// approvals must not interleave.
	mu sync.Mutex
}

// NewDecider returns a Decider over st. kick (may be nil) is called after a
// decision resolved a hold, to resume its work without waiting for the
// Resumer's next tick.
func NewDecider(st store.Store, kick func()) *Decider {
	return &Decider{st: st, kick: kick, now: func() time.Time { return time.Now().UTC() }}
}

// Decide applies one decision (KiCI held-run decision semantics):
//   - an operator (Decision.Operator: an admin token acting as itself)
//     may approve or reject any hold: an approval satisfies every open
//     clause at once and ends a wait timer early;
//   - a directory member acts only where it qualifies: on a reviewer hold
//     it must be named by one of the clauses (by user id) — an approval
//     satisfies the open clauses naming it, a rejection rejects; on a
//     security hold (fork pull request, trust floor) its CI trust must be
//     write or admin; a wait timer is the operator's to end;
//   - a hold with no clauses needs any one (eligible) approval; a single
//     rejection rejects the hold (its work is cancelled);
//   - the hold is released once no clause is open, else it stays pending
//     and Result.Remaining lists the open clauses;
//   - a concurrency hold cannot be decided: it ends when a slot frees up.
//
// Every decision writes an access-log row (held_run.approve or
// held_run.reject). Errors: ErrBadDecision, ErrNotFound (unknown, other
// org, already resolved or past its expiry), ErrIneligible (with the open
// clauses in its message), store errors.
func (d *Decider) Decide(ctx context.Context, dec Decision) (Result, error) {
	if dec.Decision != Approve && dec.Decision != Reject {
		return Result{}, ErrBadDecision
	}
	if len(dec.Reason) > MaxReasonBytes || !utf8.ValidString(dec.Reason) || strings.ContainsFunc(dec.Reason, unicode.IsControl) {
		return Result{}, fmt.Errorf("%w: reason must be one line of valid UTF-8 without control characters, at most %d bytes", ErrBadDecision, MaxReasonBytes)
	}
	if dec.Approver == "" {
		return Result{}, fmt.Errorf("%w: approver required", ErrBadDecision)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h, err := d.st.GetHeldRun(ctx, dec.HeldRunID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{}, ErrNotFound
	}
	if err != nil {
		return Result{}, err
	}
	now := d.now()
	if h.OrgID != dec.OrgID || h.Status != hold.Pending || !now.Before(h.ExpiresAt) {
		return Result{}, ErrNotFound
	}
	if h.HoldType == hold.Concurrency {
		return Result{}, fmt.Errorf("%w: a concurrency hold ends when a slot of its context group frees up; it cannot be approved or rejected (cancel the run instead)", ErrIneligible)
	}
	rec := &store.HeldRunApproval{Approver: dec.Approver, Decision: string(dec.Decision), Reason: dec.Reason, At: now}
	clauses := append([]store.ApprovalClause(nil), h.Clauses...)
	to, res := hold.Status(""), Result{}
	if !dec.Operator {
		if err := d.eligible(ctx, h, dec.Approver); err != nil {
			return Result{}, err
		}
	}
	if dec.Decision == Reject {
		to, res.Status = hold.Rejected, hold.Rejected
	} else {
		open := 0
		for i := range clauses {
			c := &clauses[i]
			if c.SatisfiedBy != "" {
				continue
			}
			if dec.Operator || c.Value == dec.Approver {
				c.SatisfiedBy = dec.Approver
				rec.Clauses = append(rec.Clauses, c.Value)
				continue
			}
			open++
		}
		if !dec.Operator && len(rec.Clauses) == 0 && open > 0 {
			return Result{}, fmt.Errorf("%w: %s has no open clause to satisfy (open: %s)", ErrIneligible, dec.Approver, strings.Join(openClauses(clauses), ", "))
		}
		res.Status = hold.Released
		if open > 0 {
			res.Status = hold.Pending
			res.Remaining = openClauses(clauses)
		} else {
			to = hold.Approved
		}
	}
	ok, err := d.st.DecideHeldRun(ctx, h.ID, rec, clauses, to, dec.Approver, dec.Reason, now)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !ok) {
		return Result{}, ErrNotFound
	}
	if err != nil {
		return Result{}, err
	}
	detail := fmt.Sprintf("%s by %s: %s", dec.Decision, dec.Approver, res.Status)
	if dec.Reason != "" {
		detail += " (" + dec.Reason + ")"
	}
	if err := d.st.AppendAccessLog(ctx, &store.AccessLogEntry{
		TokenID: dec.ActorTokenID, TokenLabel: dec.ActorTokenLabel, Role: dec.ActorRole,
		Action: "held_run." + string(dec.Decision), Resource: "held_run:" + h.ID + ":run:" + h.RunID, Detail: detail,
	}); err != nil {
		return Result{}, fmt.Errorf("decision committed but its access-log row failed: %w", err)
	}
	if to != "" && d.kick != nil {
		d.kick()
	}
	return res, nil
}

// eligible reports whether directory member approver may decide h:
// a reviewer hold needs a clause naming it; a security hold needs CI trust
// write or admin; any other hold (a wait timer) is the operator's.
func (d *Decider) eligible(ctx context.Context, h *store.HeldRun, approver string) error {
	switch h.HoldType {
	case hold.Security:
		members, err := d.st.ListDirectoryMembers(ctx, h.OrgID)
		if err != nil {
			return err
		}
		trust := ""
		for _, m := range members {
			if m.UserID == approver && trustRank(m.CITrust) > trustRank(trust) {
				trust = m.CITrust
			}
		}
		if trustRank(trust) < trustRank(store.CITrustWrite) {
			return fmt.Errorf("%w: security holds need CI trust write or admin; %s has %q", ErrIneligible, approver, trust)
		}
		return nil
	case hold.Reviewer:
		for _, c := range h.Clauses {
			if c.Value == approver {
				return nil
			}
		}
		var names []string
		for _, c := range h.Clauses {
			names = append(names, c.Kind+":"+c.Value)
		}
		return fmt.Errorf("%w: %s is not a reviewer of this hold (%s)", ErrIneligible, approver, strings.Join(names, ", "))
	}
	return fmt.Errorf("%w: a %s hold can only be decided by an operator (an admin token without --as)", ErrIneligible, h.HoldType)
}

// openClauses lists the clauses nobody satisfied yet as "kind:value".
func openClauses(clauses []store.ApprovalClause) []string {
	var out []string
	for _, c := range clauses {
		if c.SatisfiedBy == "" {
			out = append(out, c.Kind+":"+c.Value)
		}
	}
	return out
}

// trustRank orders CI trust levels (none < read < write < admin).
func trustRank(level string) int {
	switch level {
	case store.CITrustRead:
		return 1
	case store.CITrustWrite:
		return 2
	case store.CITrustAdmin:
		return 3
	}
	return 0
}
