package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/store"
)

// Held-run routes (KiCI orchestrator held-run admin routes): list the holds
// of an org and approve or reject one. They exist for independent mode,
// where the operator is the authority; a Platform-connected orchestrator
// leaves the decision to the Platform and answers 409.

// HoldDecider applies an approve/reject decision to a hold
// (approval.Decider): it validates the decision, applies the clause logic,
// commits the decision, writes the held_run.approve|reject access-log row
// and resumes or cancels the held work. Errors: approval.ErrNotFound,
// approval.ErrIneligible, approval.ErrBadDecision, or a store error.
type HoldDecider interface {
	Decide(ctx context.Context, d approval.Decision) (approval.Result, error)
}

// platformConnected reports whether mode attaches the orchestrator to the
// KiCI Platform (platform, hybrid, observed); "" is independent.
func platformConnected(mode config.Mode) bool {
	return mode.PlatformConnected()
}

// platformRefuses answers 409 with message(mode) when the orchestrator runs
// Platform-connected, where the Platform owns what the route would change,
// and reports whether it answered.
func (s *server) platformRefuses(w http.ResponseWriter, message func(mode config.Mode) string) bool {
	if !platformConnected(s.d.Mode) {
		return false
	}
	writeError(w, http.StatusConflict, message(s.d.Mode))
	return true
}

// heldRunsPlatformMsg is the 409 body of the held-run routes in a
// Platform-connected mode.
func heldRunsPlatformMsg(mode config.Mode) string {
	return fmt.Sprintf("Held runs are decided on the KiCI Platform in %s mode: use the Platform dashboard, `kici approve <runId>`, or a `/kici approve` pull-request comment", mode)
}

// maxDecisionReason caps a decision's reason (bytes).
const maxDecisionReason = 1024

// principal is the authenticated caller of r (zero when none).
func principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

// customerIDProblem returns why id is not a valid customerId ("" when it
// is).
func customerIDProblem(id string) string {
	switch {
	case id == "":
		return "customerId required"
	case !orgIDRe.MatchString(id):
		return "invalid customerId"
	}
	return ""
}

// customerParam reads and validates the customerId query parameter,
// answering 400 itself.
func customerParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	org := r.URL.Query().Get("customerId")
	if msg := customerIDProblem(org); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return "", false
	}
	return org, true
}

// listHeldRuns is GET /held-runs?customerId=[&runId=][&status=pending|all]:
// {heldRuns:[apitypes.HeldRunView…]} oldest first, pending ones unless status=all.
// Every successful listing is an access-log row held_run.list.read (who
// looked at the approval queue is part of the audit trail).
func (s *server) listHeldRuns(w http.ResponseWriter, r *http.Request) {
	if s.platformRefuses(w, heldRunsPlatformMsg) {
		return
	}
	org, ok := customerParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := store.HeldRunFilter{OrgID: org, RunID: q.Get("runId"), Limit: 1000}
	switch hold.Status(q.Get("status")) {
	case "", hold.Pending:
		f.Statuses = []hold.Status{hold.Pending}
	case "all":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid status %q (allowed: pending, all)", q.Get("status")))
		return
	}
	holds, err := s.d.Store.ListHeldRuns(r.Context(), f)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.HeldRunView, 0, len(holds))
	jobNames := map[string]string{}
	for _, h := range holds {
		v := apitypes.HeldRunView{ID: h.ID, RunID: h.RunID, JobID: strPtr(h.JobID), HoldType: h.HoldType, QueueType: h.QueueType,
			Status: h.Status, HoldScope: h.HoldScope, Reason: h.Reason, Contexts: h.Contexts, Group: strPtr(h.Group),
			ExpiresAt: h.ExpiresAt, CreatedAt: h.CreatedAt, Clauses: orEmpty(h.Clauses), Approvals: orEmpty(h.Approvals),
			ResolvedBy: strPtr(h.ResolvedBy), ResolveNote: strPtr(h.ResolveNote)}
		if h.JobID != "" {
			name, seen := jobNames[h.JobID]
			if !seen {
				j, err := s.d.Store.GetJob(r.Context(), h.JobID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					s.internalError(w, r, err)
					return
				}
				if j != nil {
					name = j.JobName
				}
				jobNames[h.JobID] = name
			}
			v.JobName = strPtr(name)
		}
		if v.Contexts == nil {
			v.Contexts = []string{}
		}
		out = append(out, v)
	}
	detail := fmt.Sprintf("status=%s count=%d", orDefault(q.Get("status"), string(hold.Pending)), len(out))
	if f.RunID != "" {
		detail = "runId=" + f.RunID + " " + detail
	}
	// The row is written before the answer: a listing that cannot be
	// audited is not served.
	if err := s.d.Store.AppendAccessLog(r.Context(), auditEntry(r, "held_run.list.read", "held_runs:"+org, detail)); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.HeldRunList{HeldRuns: out})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// decideHeldRun is POST /held-runs/decision {customerId, heldRunId,
// decision, reason?, asUserId?}: the Result of approval.Decider. Without
// asUserId the approver is the calling token ("service:<tokenId>", an
// operator override); with it, the named approval-directory member.
func (s *server) decideHeldRun(w http.ResponseWriter, r *http.Request) {
	if s.platformRefuses(w, heldRunsPlatformMsg) {
		return
	}
	if s.d.Approvals == nil {
		writeError(w, http.StatusServiceUnavailable, "Held-run decisions are not available on this orchestrator")
		return
	}
	var b struct {
		CustomerID string                `json:"customerId"`
		HeldRunID  string                `json:"heldRunId"`
		Decision   approval.DecisionWord `json:"decision"`
		Reason     string                `json:"reason"`
		AsUserID   string                `json:"asUserId"`
	}
	if !decodeBody(w, r, &b) {
		return
	}
	switch {
	case customerIDProblem(b.CustomerID) != "":
		writeError(w, http.StatusBadRequest, customerIDProblem(b.CustomerID))
		return
	case b.HeldRunID == "" || len(b.HeldRunID) > 128:
		writeError(w, http.StatusBadRequest, "heldRunId required")
		return
	case b.Decision != approval.Approve && b.Decision != approval.Reject:
		writeError(w, http.StatusBadRequest, approval.ErrBadDecision.Error())
		return
	case len(b.Reason) > maxDecisionReason:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reason is at most %d bytes", maxDecisionReason))
		return
	}
	p := principal(r)
	d := approval.Decision{OrgID: b.CustomerID, HeldRunID: b.HeldRunID, Decision: b.Decision, Reason: b.Reason,
		Approver: approval.ServicePrefix + p.TokenID, Operator: true, ActorTokenID: p.TokenID, ActorTokenLabel: p.Label, ActorRole: string(p.Role)}
	if b.AsUserID != "" {
		members, err := s.d.Store.ListDirectoryMembers(r.Context(), b.CustomerID)
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		found := false
		for _, m := range members {
			found = found || m.UserID == b.AsUserID
		}
		if !found {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("asUserId %q is not a member of the approval directory of %s (register it with `kici-admin trust-policy directory-set`)", b.AsUserID, b.CustomerID))
			return
		}
		d.Approver, d.Operator = b.AsUserID, false
	}
	res, err := s.d.Approvals.Decide(r.Context(), d)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, approval.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, approval.ErrIneligible):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error(), "status": "ineligible"})
	case errors.Is(err, approval.ErrBadDecision):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		s.internalError(w, r, err)
	}
}
