package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// secretsOr503 returns the secret service or answers 503.
func (s *server) secretsOr503(w http.ResponseWriter) *secrets.Service {
	if s.d.Secrets == nil {
		writeError(w, http.StatusServiceUnavailable, "Secrets are unavailable: no master key is configured")
	}
	return s.d.Secrets
}

// secretErr maps secret-service errors to 400/404/409/500.
func (s *server) secretErr(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	switch {
	case errors.Is(err, secrets.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, notFound)
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, "Scope already exists")
	default:
		s.internalError(w, r, err)
	}
}

func orgParam(w http.ResponseWriter, org string) bool {
	if org == "" {
		writeError(w, http.StatusBadRequest, "orgId required")
		return false
	}
	if err := secrets.ValidateOrg(org); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// orgScopeParams checks the organization and normalises the secret scope
// a route names, answering 400 when either is invalid.
func orgScopeParams(w http.ResponseWriter, org, rawScope string) (scope string, ok bool) {
	if !orgParam(w, org) {
		return "", false
	}
	scope, err := secrets.NormalizeScope(rawScope)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return scope, true
}

func (s *server) listSecretScopes(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	org := r.URL.Query().Get("orgId")
	if svc == nil || !orgParam(w, org) {
		return
	}
	scopes, err := svc.Store().ListSecretScopes(r.Context(), org)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		out = append(out, secrets.Backend+":"+sc)
	}
	writeJSON(w, http.StatusOK, apitypes.SecretScopeList{Scopes: out})
}

func (s *server) listSecretKeys(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	if svc == nil {
		return
	}
	q := r.URL.Query()
	scope, ok := orgScopeParams(w, q.Get("orgId"), q.Get("scope"))
	if !ok {
		return
	}
	keys, err := svc.Store().ListSecretKeys(r.Context(), q.Get("orgId"), scope)
	if err != nil {
		s.secretErr(w, r, err, "Secret scope not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.SecretKeyList{Keys: keys})
}

func (s *server) createSecretScope(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	if svc == nil {
		return
	}
	var b struct {
		OrgID string `json:"orgId"`
		Scope string `json:"scope"`
	}
	if !decodeBody(w, r, &b) {
		return
	}
	scope, ok := orgScopeParams(w, b.OrgID, b.Scope)
	if !ok {
		return
	}
	if err := svc.Store().CreateSecretScope(r.Context(), b.OrgID, scope,
		auditEntry(r, "secret.scope.create", secrets.Resource(b.OrgID, scope, ""), "")); err != nil {
		s.secretErr(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Created{Created: true})
}

func (s *server) deleteSecretScope(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	if svc == nil {
		return
	}
	org := r.PathValue("orgId")
	scope, ok := orgScopeParams(w, org, r.PathValue("scope"))
	if !ok {
		return
	}
	if err := svc.Store().DeleteSecretScope(r.Context(), org, scope,
		auditEntry(r, "secret.scope.delete", secrets.Resource(org, scope, ""), "")); err != nil {
		s.secretErr(w, r, err, "Secret scope not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
}

func (s *server) putSecret(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	if svc == nil {
		return
	}
	var b struct {
		Value *string `json:"value"`
	}
	if !decodeBody(w, r, &b) {
		return
	}
	if b.Value == nil {
		writeError(w, http.StatusBadRequest, "value required")
		return
	}
	org, key := r.PathValue("orgId"), r.PathValue("key")
	scope, ok := orgScopeParams(w, org, r.PathValue("scope"))
	if !ok {
		return
	}
	if err := svc.Put(r.Context(), org, scope, key, *b.Value, auditEntry(r, "secret.set", secrets.Resource(org, scope, key), "")); err != nil {
		s.secretErr(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Set{Set: true})
}

func (s *server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	// DELETE /secrets/scopes/{orgId}/{scope} shares this pattern (the two
	// KiCI paths overlap in a ServeMux); both need secret.delete.
	if r.PathValue("orgId") == "scopes" {
		r.SetPathValue("orgId", r.PathValue("scope"))
		r.SetPathValue("scope", r.PathValue("key"))
		s.deleteSecretScope(w, r)
		return
	}
	svc := s.secretsOr503(w)
	org, key := r.PathValue("orgId"), r.PathValue("key")
	if svc == nil || !orgParam(w, org) {
		return
	}
	scope, err := secrets.NormalizeScope(r.PathValue("scope"))
	if err == nil {
		err = secrets.ValidateKey(key)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := svc.Store().DeleteSecret(r.Context(), org, scope, key, auditEntry(r, "secret.delete", secrets.Resource(org, scope, key), "")); err != nil {
		s.secretErr(w, r, err, "Secret not found")
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
}

func (s *server) rotateKey(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	if svc == nil {
		return
	}
	counts, err := svc.Rotate(r.Context(), auditEntry(r, "key.rotate", "master_key", ""))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.KeyRotation{ReEncrypted: counts["reEncrypted"], ReEncryptedSigningKeys: counts["reEncryptedSigningKeys"]})
}

// ---------------------------------------------------------------- access log

func (s *server) listAccessLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AccessLogFilter{Action: q.Get("action"), TokenID: q.Get("tokenId"), RoutingKey: q.Get("routingKey")}
	var err error
	if f.Limit, err = parseIntParam(r, "limit", 100, 1); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Limit = min(f.Limit, 1000)
	if f.Offset, err = parseIntParam(r, "offset", 0, 0); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if raw := q.Get("since"); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid since %q: must be an ISO 8601 timestamp with a time zone", raw))
			return
		}
		f.Since = &t
	}
	entries, err := s.d.Store.ListAccessLog(r.Context(), f)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.AccessLogList{Entries: derefAll(entries)})
}
