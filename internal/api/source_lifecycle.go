package api

import (
	"errors"
	"fmt"
	"net/http"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// Pausing and removing sources (KiCI generic-source DELETE and
// enable/disable, served here for every source kind: local, generic,
// universal-git and GitHub, which share one sources table).

// deleteSource is DELETE /generic-sources/{id}: the source, its settings,
// webhook secrets and registrations go, in one transaction with the
// source.delete access-log row; deliveries, the event log, rejected
// deliveries, runs and jobs stay. 200 {"deleted":true}; 404 unknown.
// KiCI soft-deletes unless ?hard=true; kici always removes the row, so
// the name is free again and the webhook route answers 404 at once.
func (s *server) deleteSource(w http.ResponseWriter, r *http.Request) {
	src := s.loadSource(w, r)
	if src == nil {
		return
	}
	detail := "org=" + src.OrgID + " name=" + src.Name + " provider=" + string(src.Provider) + " routingKey=" + src.RoutingKey
	err := s.d.Store.DeleteSource(r.Context(), src.ID, auditEntry(r, "source.delete", "source:"+src.ID, detail))
	if errors.Is(err, store.ErrNotFound) {
		// Deleted by a concurrent request since loadSource.
		writeError(w, http.StatusNotFound, "Source not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
}

// enableSource is POST /generic-sources/{id}/enable.
func (s *server) enableSource(w http.ResponseWriter, r *http.Request) { s.setSourceEnabled(w, r, true) }

// disableSource is POST /generic-sources/{id}/disable.
func (s *server) disableSource(w http.ResponseWriter, r *http.Request) {
	s.setSourceEnabled(w, r, false)
}

// setSourceEnabled pauses or resumes the {id} source: a disabled source's
// webhook routes answer 404 "source is disabled" and its registrations
// (schedules, kici_event, workflow/job completion, generic_webhook
// triggers) start nothing, but everything it owns is kept. Idempotent.
// 200 {"enabled":bool}; 404 unknown. The access-log row is written by the
// generic admin-write recorder after the change.
func (s *server) setSourceEnabled(w http.ResponseWriter, r *http.Request, enabled bool) {
	err := s.d.Store.SetSourceEnabled(r.Context(), r.PathValue("id"), enabled)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Source not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.SourceEnabled{Enabled: enabled})
}

// putSourceOrgWide is PUT /generic-sources/{id}/org-wide-workflows
// {"orgWideWorkflows":"allow"|"deny"}: the operator's choice whether the
// organization-wide workflows of the org's other sources run for the {id}
// source's events (docs/workflows.md, Organization-wide workflows). Not
// open to routing-key-scoped tokens: a source's owner cannot opt its
// repository out of the org's checks. 200 with the stored value; 400 for
// another value; 404 unknown source.
func (s *server) putSourceOrgWide(w http.ResponseWriter, r *http.Request) {
	var req apitypes.SourceOrgWideWorkflows
	if !decodeBody(w, r, &req) {
		return
	}
	if req.OrgWideWorkflows != store.OrgWideAllow && req.OrgWideWorkflows != store.OrgWideDeny {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("orgWideWorkflows %q: must be %q or %q", req.OrgWideWorkflows, store.OrgWideAllow, store.OrgWideDeny))
		return
	}
	ctx := r.Context()
	id := r.PathValue("id")
	if _, err := s.d.Store.GetSource(ctx, id); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Source not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	set, err := s.d.Store.GetSourceSettings(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		set, err = &store.SourceSettings{SourceID: id}, nil
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	set.OrgWideWorkflows = req.OrgWideWorkflows
	if err := s.d.Store.PutSourceSettings(ctx, set); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.SourceOrgWideWorkflows{OrgWideWorkflows: set.OrgWideWorkflows})
}
