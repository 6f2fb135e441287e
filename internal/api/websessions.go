package api

import (
	"errors"
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// listWebSessions lists the web UI's sessions (?subject= one person's),
// newest first.
func (s *server) listWebSessions(w http.ResponseWriter, r *http.Request) {
	rows, err := s.d.Store.ListWebSessions(r.Context(), strings.TrimSpace(r.URL.Query().Get("subject")))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := apitypes.WebSessionList{Sessions: []apitypes.WebSessionView{}}
	for _, x := range rows {
		out.Sessions = append(out.Sessions, apitypes.WebSessionView{ID: x.ID, Kind: x.Kind, Subject: x.Subject, Name: x.Name,
			Role: x.Role, RoutingKey: x.RoutingKey, Client: x.Client, CreatedAt: x.CreatedAt, LastSeenAt: x.LastSeenAt})
	}
	writeJSON(w, http.StatusOK, out)
}

// revokeWebSession ends one session at once (its next request is signed
// out, on every node).
func (s *server) revokeWebSession(w http.ResponseWriter, r *http.Request) {
	err := s.d.Store.DeleteWebSession(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Session not found (list them with kici-admin session list)")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Revoked{Revoked: true})
}

// revokeWebSessionsOf ends every session of ?subject= (a person's
// identity, or "service:<token id>").
func (s *server) revokeWebSessionsOf(w http.ResponseWriter, r *http.Request) {
	subject := strings.TrimSpace(r.URL.Query().Get("subject"))
	if subject == "" {
		writeError(w, http.StatusBadRequest, "subject is required (e.g. ?subject=gitea:alice); to end one session use DELETE /web-sessions/{id}")
		return
	}
	n, err := s.d.Store.DeleteWebSessionsOf(r.Context(), subject)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.WebSessionsRevoked{Revoked: n})
}
