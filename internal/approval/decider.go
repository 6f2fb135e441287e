package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"kici.dev/kici/internal/store"
)

// MaxReasonBytes caps a decision's reason.
const MaxReasonBytes = 1024

// ServicePrefix starts the approver subject of a decision made with an
// admin token and no directory identity ("service:<tokenId>"). Such an
// approver is the operator: it satisfies every open clause at once.
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
//   - a reject resolves the hold as rejected (its work is cancelled);
//   - an approve by an operator (Approver "service:<tokenId>") satisfies
//     every open clause; an approve by a user satisfies the open clauses
//     naming that user (by user id, or by the provider username linked to
//     it in the approval directory) and is ErrIneligible when it satisfies
//     none; a hold with no clauses needs any one approval;
//   - the hold is released once no clause is open, else it stays pending
//     and Result.Remaining lists the open clauses.
//
// Every decision writes an access-log row (held_run.approve or
// held_run.reject). Errors: ErrBadDecision, ErrNotFound (unknown, other
// org, already resolved or past its expiry), ErrIneligible, store errors.
func (d *Decider) Decide(ctx context.Context, dec Decision) (Result, error) {
	if dec.Decision != Approve && dec.Decision != Reject {
		return Result{}, ErrBadDecision
	}
	if len(dec.Reason) > MaxReasonBytes || !utf8.ValidString(dec.Reason) {
		return Result{}, fmt.Errorf("%w: reason must be valid UTF-8 of at most %d bytes", ErrBadDecision, MaxReasonBytes)
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
	if h.OrgID != dec.OrgID || h.Status != store.HoldPending || !now.Before(h.ExpiresAt) {
		return Result{}, ErrNotFound
	}
	if h.HoldType == store.HoldConcurrency {
		return Result{}, fmt.Errorf("%w: a concurrency hold ends when a slot of its context group frees up; it cannot be approved or rejected (cancel the run instead)", ErrIneligible)
	}
	rec := &store.HeldRunApproval{Approver: dec.Approver, Decision: dec.Decision, Reason: dec.Reason, At: now}
	clauses := append([]store.ApprovalClause(nil), h.Clauses...)
	to, res := "", Result{}
	if dec.Decision == Reject {
		to, res.Status = store.HoldRejected, "rejected"
	} else {
		names, trust, err := d.identities(ctx, h.OrgID, dec.Approver)
		if err != nil {
			return Result{}, err
		}
		if h.QueueType == store.HoldQueueSecurity && names != nil && trust != store.CITrustWrite && trust != store.CITrustAdmin {
			// Security holds (fork pull requests, trust floors) need a
			// member with CI trust write or admin (KiCI /kici approve).
			return Result{}, ErrIneligible
		}
		open := 0
		for i := range clauses {
			c := &clauses[i]
			if c.SatisfiedBy != "" {
				continue
			}
			if names == nil || names[c.Value] {
				c.SatisfiedBy = dec.Approver
				rec.Clauses = append(rec.Clauses, c.Value)
				continue
			}
			open++
		}
		if len(rec.Clauses) == 0 && open > 0 {
			return Result{}, ErrIneligible
		}
		res.Status = "released"
		if open > 0 {
			res.Status = "pending"
			for _, c := range clauses {
				if c.SatisfiedBy == "" {
					res.Remaining = append(res.Remaining, c.Kind+":"+c.Value)
				}
			}
		} else {
			to = store.HoldApproved
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
		Action: "held_run." + dec.Decision, Resource: "held_run:" + h.ID + ":run:" + h.RunID, Detail: detail,
	}); err != nil {
		return Result{}, fmt.Errorf("decision committed but its access-log row failed: %w", err)
	}
	if to != "" && d.kick != nil {
		d.kick()
	}
	return res, nil
}

// identities returns the clause values approver qualifies for — nil for an
// operator (every clause), else the approver's user id plus the provider
// usernames the approval directory links to it — and the approver's
// highest CI trust level in the directory ("" when not a member).
func (d *Decider) identities(ctx context.Context, orgID, approver string) (map[string]bool, string, error) {
	if strings.HasPrefix(approver, ServicePrefix) {
		return nil, "", nil
	}
	names := map[string]bool{approver: true}
	members, err := d.st.ListDirectoryMembers(ctx, orgID)
	if err != nil {
		return nil, "", err
	}
	trust := ""
	for _, m := range members {
		if m.UserID != approver {
			continue
		}
		if m.ProviderUsername != "" {
			names[m.ProviderUsername] = true
		}
		if trustRank(m.CITrust) > trustRank(trust) {
			trust = m.CITrust
		}
	}
	return names, trust, nil
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
