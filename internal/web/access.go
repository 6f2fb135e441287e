package web

import (
	"errors"
	"fmt"
	"net/http"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// The UI answers exactly what the admin API answers for the same caller:
// the route's permission from auth's role × permission table, then the
// routing-key scope rule (a scoped token reaches only its own runs and
// sources; orchestrator-wide pages need an unscoped token).
const (
	msgScopeMismatch    = "Token is scoped to another routing key and cannot access this resource"
	msgUnscopedRequired = "This page requires an unscoped token"
)

// can reports whether p's role holds perm.
func can(p auth.Principal, perm auth.Permission) bool { return auth.HasPermission(p.Role, perm) }

// require answers 403 unless p holds perm (and, when unscoped is set, p is
// unscoped). It reports whether the request may go on.
func (u *UI) require(w http.ResponseWriter, r *http.Request, p auth.Principal, perm auth.Permission, unscoped bool) bool {
	if !can(p, perm) {
		u.errorPage(w, r, http.StatusForbidden, fmt.Sprintf("Role %q does not have permission %q", p.Role, perm))
		return false
	}
	if unscoped && p.RoutingKey != "" {
		u.errorPage(w, r, http.StatusForbidden, msgUnscopedRequired)
		return false
	}
	return true
}

// loadRun checks perm and the run's scope, then loads {runId}: 403, 404 or
// the run. A scoped caller gets 403 for another key's run and for an
// unknown one alike, as from the API.
func (u *UI) loadRun(w http.ResponseWriter, r *http.Request, p auth.Principal, perm auth.Permission) (*store.Run, bool) {
	if !u.require(w, r, p, perm, false) {
		return nil, false
	}
	id := r.PathValue("runId")
	if p.RoutingKey != "" {
		ok, err := auth.RunInScope(r.Context(), u.d.Store, id, p.RoutingKey)
		if err != nil {
			u.internalError(w, r, err)
			return nil, false
		}
		if !ok {
			u.errorPage(w, r, http.StatusForbidden, msgScopeMismatch)
			return nil, false
		}
	}
	run, err := u.d.Store.GetRun(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		u.errorPage(w, r, http.StatusNotFound, "Run not found")
		return nil, false
	} else if err != nil {
		u.internalError(w, r, err)
		return nil, false
	}
	return run, true
}

// loadRunJob is loadRun (run.read) and then {jobId}, 404 when the job
// belongs to another run.
func (u *UI) loadRunJob(w http.ResponseWriter, r *http.Request, p auth.Principal) (*store.Run, *store.Job, bool) {
	run, ok := u.loadRun(w, r, p, auth.PermRunRead)
	if !ok {
		return nil, nil, false
	}
	job, err := u.d.Store.GetJob(r.Context(), r.PathValue("jobId"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && job.RunID != run.ID) {
		u.errorPage(w, r, http.StatusNotFound, "Job not found")
		return nil, nil, false
	} else if err != nil {
		u.internalError(w, r, err)
		return nil, nil, false
	}
	return run, job, true
}

func (u *UI) internalError(w http.ResponseWriter, r *http.Request, err error) {
	u.log.Error("web: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	u.errorPage(w, r, http.StatusInternalServerError, "Internal server error")
}

// audit writes an access-log row for a UI action, with the same action
// name as the admin API route that does the same thing, so the audit trail
// reads the same whichever way an operator acted.
func (u *UI) audit(r *http.Request, p auth.Principal, action, resource string) {
	e := &store.AccessLogEntry{TokenID: p.TokenID, TokenLabel: p.Label, Role: string(p.Role), RoutingKey: p.RoutingKey,
		Action: action, Resource: resource, Detail: "via web UI"}
	if err := u.d.Store.AppendAccessLog(r.Context(), e); err != nil {
		u.log.Error("web: access log write failed", "action", action, "error", err)
	}
}
