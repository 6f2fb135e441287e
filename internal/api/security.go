package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// AgentTokenPath is the agent-token family, outside the admin prefix as in
// KiCI (POST/GET /api/v1/agent-tokens, DELETE /api/v1/agent-tokens/{id}).
const AgentTokenPath = "/api/v1/agent-tokens"

// AgentKicker closes live agent connections of a revoked token
// (dispatch.Dispatcher.KickToken).
type AgentKicker interface {
	// KickToken closes every socket authenticated with tokenID (close 4010)
	// and returns how many it closed.
	KickToken(tokenID string) int
}

// Bodies of the two routing-key scope refusals (KiCI S:27254).
const (
	msgScopeMismatch    = "Token is scoped to another routing key and cannot access this resource"
	msgUnscopedRequired = "This route requires an unscoped token"
)

// scopeAwareRoutes are the routes a routing-key-scoped token may call: list
// routes filter to the token's key and the others check the key of the
// resource they address. Every other admin route is org- or
// orchestrator-wide and answers a scoped token 403 (msgUnscopedRequired).
var scopeAwareRoutes = map[string]string{
	"GET " + AdminPrefix + "/runs":                                               "list",
	"GET " + AdminPrefix + "/runs/{runId}":                                       "run",
	"GET " + AdminPrefix + "/runs/{runId}/jobs":                                  "run",
	"GET " + AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs":           "run",
	"GET " + AdminPrefix + "/runs/{runId}/events":                                "run",
	"GET " + AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream":    "run",
	"POST " + AdminPrefix + "/runs/{runId}/cancel":                               "run",
	"POST " + AdminPrefix + "/runs/{runId}/rerun":                                "run",
	"GET " + AdminPrefix + "/runs/{runId}/attestations":                          "run",
	"GET " + AdminPrefix + "/generic-sources":                                    "list",
	"GET " + AdminPrefix + "/generic-sources/{id}":                               "source",
	"DELETE " + AdminPrefix + "/generic-sources/{id}":                            "source",
	"POST " + AdminPrefix + "/generic-sources/{id}/enable":                       "source",
	"POST " + AdminPrefix + "/generic-sources/{id}/disable":                      "source",
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secret":                "source",
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secrets":               "source",
	"POST " + AdminPrefix + "/generic-sources/{id}/webhook-secrets":              "source",
	"DELETE " + AdminPrefix + "/generic-sources/{id}/webhook-secrets/{secretId}": "source",
}

// callerRoutingKey is the routing-key scope of the request's token ("" =
// unscoped or unauthenticated).
func callerRoutingKey(r *http.Request) string {
	p, _ := auth.PrincipalFrom(r.Context())
	return p.RoutingKey
}

// gateScoped is gate plus the routing-key scope rule for route ("METHOD
// path"): scope-aware routes check the addressed run's or source's key,
// every other route refuses scoped tokens.
func (s *server) gateScoped(route, perm string, h http.HandlerFunc) http.Handler {
	kind := scopeAwareRoutes[route]
	h = s.audited(route, h)
	return s.gate(perm, func(w http.ResponseWriter, r *http.Request) {
		rk := callerRoutingKey(r)
		if rk == "" {
			h(w, r)
			return
		}
		switch kind {
		case "list":
		case "run":
			if ok, err := s.runInScope(r.Context(), r.PathValue("runId"), rk); err != nil {
				s.internalError(w, r, err)
				return
			} else if !ok {
				writeError(w, http.StatusForbidden, msgScopeMismatch)
				return
			}
		case "source":
			src, err := s.d.Store.GetSource(r.Context(), r.PathValue("id"))
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.internalError(w, r, err)
				return
			}
			if src == nil || src.RoutingKey != rk {
				writeError(w, http.StatusForbidden, msgScopeMismatch)
				return
			}
		default:
			writeError(w, http.StatusForbidden, msgUnscopedRequired)
			return
		}
		h(w, r)
	})
}

// runInScope reports whether run id belongs to a source with routing key
// rk. An unknown run is out of scope (403, not 404: a scoped token learns
// nothing about other keys' ids).
func (s *server) runInScope(ctx context.Context, id, rk string) (bool, error) {
	return auth.RunInScope(ctx, s.d.Store, id, rk)
}

// auditEntry starts an access-log entry for the caller of r.
func auditEntry(r *http.Request, action, resource, detail string) *store.AccessLogEntry {
	p, _ := auth.PrincipalFrom(r.Context())
	return &store.AccessLogEntry{TokenID: p.TokenID, TokenLabel: p.Label, Role: p.Role, RoutingKey: p.RoutingKey,
		Action: action, Resource: resource, Detail: detail}
}

// ---------------------------------------------------------------- admin tokens

type createTokenBody struct {
	Label      string  `json:"label"`
	Role       string  `json:"role"`
	RoutingKey *string `json:"routingKey"`
	ExpiresAt  *string `json:"expiresAt"`
}

func (s *server) createAdminToken(w http.ResponseWriter, r *http.Request) {
	var b createTokenBody
	if !decodeBody(w, r, &b) {
		return
	}
	b.Label = strings.TrimSpace(b.Label)
	if b.Label == "" || len(b.Label) > 255 {
		writeError(w, http.StatusBadRequest, "label must be 1-255 characters")
		return
	}
	if !auth.IsRole(b.Role) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("role %q must be owner, admin or auditor", b.Role))
		return
	}
	rk := ""
	if b.RoutingKey != nil {
		rk = strings.TrimSpace(*b.RoutingKey)
		if rk == "" || len(rk) > 255 {
			writeError(w, http.StatusBadRequest, "routingKey must be 1-255 characters, or null for an unscoped token")
			return
		}
	}
	t := &store.AdminToken{ID: uuid.NewString(), Label: b.Label, Role: b.Role, CreatedAt: time.Now().UTC()}
	if b.ExpiresAt != nil {
		exp, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("expiresAt %q must be an ISO 8601 timestamp with a time zone", *b.ExpiresAt))
			return
		}
		if !exp.After(time.Now()) {
			writeError(w, http.StatusBadRequest, "expiresAt must be in the future")
			return
		}
		exp = exp.UTC()
		t.ExpiresAt = &exp
	}
	plain := auth.NewAdminTokenPlaintext()
	t.TokenHash = auth.Hash(plain)
	detail := "role=" + b.Role
	if rk != "" {
		detail += " routingKey=" + rk
	}
	if err := s.d.Store.CreateAdminTokenAudited(r.Context(), t, rk, auditEntry(r, "token.create", "admin_token:"+t.ID, detail)); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"token": plain, "id": t.ID})
}

// AdminTokenView is one row of GET /admin/tokens. The hash is never
// returned. (KiCI returns the raw snake_case row; kici answers camelCase
// like the rest of its admin API.)
type AdminTokenView struct {
	ID         string     `json:"id"`
	Label      string     `json:"label"`
	Role       string     `json:"role"`
	RoutingKey *string    `json:"routingKey"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	Revoked    bool       `json:"revoked"`
}

func (s *server) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.d.Store.ListAdminTokens(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	keys, err := s.d.Store.ListAdminTokenRoutingKeys(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]AdminTokenView, 0, len(toks))
	for _, t := range toks {
		v := AdminTokenView{ID: t.ID, Label: t.Label, Role: t.Role, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, Revoked: t.Revoked}
		if rk, ok := keys[t.ID]; ok {
			v.RoutingKey = &rk
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (s *server) revokeAdminToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	changed, err := s.d.Store.RevokeAdminTokenAudited(r.Context(), id, auditEntry(r, "token.revoke", "admin_token:"+id, ""))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if !changed {
		// KiCI answers {revoked:true} for unknown ids too; we say 404 so a
		// mistyped id is never taken for a revoked token.
		tokens, err := s.d.Store.ListAdminTokens(r.Context())
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		if !slices.ContainsFunc(tokens, func(t *store.AdminToken) bool { return t.ID == id }) {
			writeError(w, http.StatusNotFound, "Token not found")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]bool{"revoked": true})
}

// ---------------------------------------------------------------- agent tokens

type createAgentTokenBody struct {
	Labels          []string `json:"labels"`
	MandatoryLabels []string `json:"mandatoryLabels"`
	ExpiresAt       *string  `json:"expiresAt"`
}

// AgentTokenView is one agent token in API answers (never the hash).
type AgentTokenView struct {
	ID          string     `json:"id"`
	TokenPrefix string     `json:"tokenPrefix"`
	Labels      []string   `json:"labels"`
	AgentType   string     `json:"agentType"`
	CreatedBy   string     `json:"createdBy,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	// MandatoryLabels are the token's taint (KiCI mandatory_labels);
	// listed for static tokens, omitted when none.
	MandatoryLabels []string `json:"mandatoryLabels,omitempty"`
}

func agentTokenView(t *store.AgentToken) AgentTokenView {
	return AgentTokenView{ID: t.ID, TokenPrefix: t.Prefix, Labels: t.Labels, AgentType: t.Kind,
		CreatedBy: t.BoundAgentID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}

func (s *server) createAgentToken(w http.ResponseWriter, r *http.Request) {
	var b createAgentTokenBody
	if !decodeBody(w, r, &b) {
		return
	}
	labels, msg := cleanLabels(b.Labels)
	if msg == "" {
		b.MandatoryLabels, msg = cleanLabels(b.MandatoryLabels)
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if b.Labels != nil && labels == nil {
		labels = []string{} // an explicit empty scope: only platform labels
	}
	plain := auth.NewAgentTokenPlaintext()
	t := &store.AgentToken{ID: uuid.NewString(), TokenHash: auth.Hash(plain), Prefix: auth.Prefix(plain),
		Kind: store.AgentTokenStatic, Labels: labels, MandatoryLabels: b.MandatoryLabels, CreatedAt: time.Now().UTC()}
	if b.ExpiresAt != nil {
		exp, err := time.Parse(time.RFC3339Nano, *b.ExpiresAt)
		if err != nil || !exp.After(time.Now()) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("expiresAt %q must be a future ISO 8601 timestamp with a time zone", *b.ExpiresAt))
			return
		}
		exp = exp.UTC()
		t.ExpiresAt = &exp
	}
	detail := "labels=" + strings.Join(labels, ",") + " mandatoryLabels=" + strings.Join(b.MandatoryLabels, ",")
	if err := s.d.Store.CreateAgentTokenAudited(r.Context(), t, auditEntry(r, "agent_token.create", "agent_token:"+t.ID, detail)); err != nil {
		s.internalError(w, r, err)
		return
	}
	v := agentTokenView(t)
	writeJSON(w, http.StatusCreated, map[string]any{"id": v.ID, "token": plain, "tokenPrefix": v.TokenPrefix,
		"labels": v.Labels, "mandatoryLabels": t.MandatoryLabels, "agentType": v.AgentType, "createdAt": v.CreatedAt, "expiresAt": v.ExpiresAt})
}

// cleanLabels validates and de-duplicates token labels: 1–255 characters,
// no blanks or commas, not in the reserved kici: namespace. It returns a
// 400 message on bad input.
func cleanLabels(in []string) ([]string, string) {
	seen := map[string]bool{}
	var out []string
	for _, l := range in {
		l = strings.TrimSpace(l)
		if l == "" || len(l) > 255 || strings.ContainsAny(l, " \t\r\n,") {
			return nil, fmt.Sprintf("label %q must be 1-255 characters without blanks or commas", l)
		}
		if strings.HasPrefix(l, "kici:") {
			return nil, fmt.Sprintf("label %q: the kici: prefix is reserved for labels the agent reports itself", l)
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out, ""
}

func (s *server) listAgentTokens(w http.ResponseWriter, r *http.Request) {
	typ := r.URL.Query().Get("type")
	if typ != "" && typ != store.AgentTokenStatic && typ != store.AgentTokenEphemeral {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("type %q must be static or ephemeral", typ))
		return
	}
	toks, err := s.d.Store.ListAgentTokens(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := []AgentTokenView{}
	for _, t := range toks {
		if t.RevokedAt != nil || (typ != "" && t.Kind != typ) {
			continue
		}
		v := agentTokenView(t)
		if t.Kind == store.AgentTokenStatic {
			// Static tokens are few (minted by hand), so one lookup each.
			if v.MandatoryLabels, err = s.d.Store.AgentTokenMandatoryLabels(r.Context(), t.ID); err != nil {
				s.internalError(w, r, err)
				return
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (s *server) revokeAgentToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.d.Store.RevokeAgentTokenAudited(r.Context(), id, time.Now().UTC(), auditEntry(r, "agent_token.revoke", "agent_token:"+id, ""))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Agent token not found or already revoked")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	kicked := 0
	if s.d.Agents != nil {
		kicked = s.d.Agents.KickToken(id)
	}
	writeJSON(w, http.StatusOK, map[string]int{"kicked": kicked})
}

// ---------------------------------------------------------------- secrets

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

// scopeParam normalises a secret scope, answering 400 when it is invalid.
func scopeParam(w http.ResponseWriter, raw string) (string, bool) {
	scope, err := secrets.NormalizeScope(raw)
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
	writeJSON(w, http.StatusOK, map[string]any{"scopes": out})
}

func (s *server) listSecretKeys(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	q := r.URL.Query()
	if svc == nil || !orgParam(w, q.Get("orgId")) {
		return
	}
	scope, ok := scopeParam(w, q.Get("scope"))
	if !ok {
		return
	}
	keys, err := svc.Store().ListSecretKeys(r.Context(), q.Get("orgId"), scope)
	if err != nil {
		s.secretErr(w, r, err, "Secret scope not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
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
	if !decodeBody(w, r, &b) || !orgParam(w, b.OrgID) {
		return
	}
	scope, ok := scopeParam(w, b.Scope)
	if !ok {
		return
	}
	if err := svc.Store().CreateSecretScope(r.Context(), b.OrgID, scope,
		auditEntry(r, "secret.scope.create", secrets.Resource(b.OrgID, scope, ""), "")); err != nil {
		s.secretErr(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"created": true})
}

func (s *server) deleteSecretScope(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsOr503(w)
	org := r.PathValue("orgId")
	if svc == nil || !orgParam(w, org) {
		return
	}
	scope, ok := scopeParam(w, r.PathValue("scope"))
	if !ok {
		return
	}
	if err := svc.Store().DeleteSecretScope(r.Context(), org, scope,
		auditEntry(r, "secret.scope.delete", secrets.Resource(org, scope, ""), "")); err != nil {
		s.secretErr(w, r, err, "Secret scope not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
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
	if !orgParam(w, org) {
		return
	}
	scope, ok := scopeParam(w, r.PathValue("scope"))
	if !ok {
		return
	}
	if err := svc.Put(r.Context(), org, scope, key, *b.Value, auditEntry(r, "secret.set", secrets.Resource(org, scope, key), "")); err != nil {
		s.secretErr(w, r, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"set": true})
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
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
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
	writeJSON(w, http.StatusOK, counts)
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
	if entries == nil {
		entries = []*store.AccessLogEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// selfAuditedRoutes write their access-log row in the same transaction as
// their change (security.go); the generic recorder skips them.
var selfAuditedRoutes = map[string]bool{
	"POST " + AdminPrefix + "/tokens":                          true,
	"DELETE " + AdminPrefix + "/tokens/{id}":                   true,
	"POST " + AgentTokenPath:                                   true,
	"DELETE " + AgentTokenPath + "/{id}":                       true,
	"POST " + AdminPrefix + "/secrets/scopes":                  true,
	"PUT " + AdminPrefix + "/secrets/{orgId}/{scope}/{key}":    true,
	"DELETE " + AdminPrefix + "/secrets/{orgId}/{scope}/{key}": true,
	"POST " + AdminPrefix + "/rotate-key":                      true,
	// DeleteSource commits the source.delete row with the removal.
	"DELETE " + AdminPrefix + "/generic-sources/{id}": true,
	// The decider writes held_run.approve|reject itself; the trust-policy
	// and directory writes commit their rows with the change.
	"POST " + AdminPrefix + "/held-runs/decision":       true,
	"PATCH " + AdminPrefix + "/trust-policy":            true,
	"PATCH " + AdminPrefix + "/trust-policy/directory":  true,
	"DELETE " + AdminPrefix + "/trust-policy/directory": true,
}

// secretReadRoutes reveal a secret value on GET (webhook secrets); each
// successful call is an access-log entry.
var secretReadRoutes = map[string]bool{
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secret":  true,
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secrets": true,
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// audited records every successful admin write, and every secret read, of
// route in the access log after the handler answered 2xx (action = the
// route pattern, resource = the concrete path). Routes whose store call
// writes its own audit row in the change's transaction are left alone; for
// the others the store offers no shared transaction, so the row follows the
// change.
func (s *server) audited(route string, h http.HandlerFunc) http.HandlerFunc {
	method, _, _ := strings.Cut(route, " ")
	if route == "" || selfAuditedRoutes[route] || (method == http.MethodGet && !secretReadRoutes[route]) {
		return h
	}
	action := route
	if secretReadRoutes[route] {
		action = "source.secret.read"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r)
		if rec.status < 200 || rec.status > 299 {
			return
		}
		e := auditEntry(r, action, r.URL.Path, "")
		if err := s.d.Store.AppendAccessLog(context.WithoutCancel(r.Context()), e); err != nil {
			s.log.Error("api: access log write failed", "action", action, "path", r.URL.Path, "error", err)
		}
	}
}
