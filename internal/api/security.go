package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// Bodies of the two routing-key scope refusals, word for word KiCI's
// (see docs/kici-compatibility.md#admin-api).
const (
	msgScopeMismatch    = "Token is scoped to another routing key and cannot access this resource"
	msgUnscopedRequired = "This route requires an unscoped token"
)

// scopeAwareRoutes are the routes a routing-key-scoped token may call: list
// routes filter to the token's key and the others check the key of the
// resource they address. Every other admin route is org- or
// orchestrator-wide and answers a scoped token 403 (msgUnscopedRequired).
var scopeAwareRoutes = map[string]string{
	"GET " + apitypes.AdminPrefix + "/runs":                                               "list",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}":                                       "run",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}/jobs":                                  "run",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs":           "run",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}/events":                                "run",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream":    "run",
	"POST " + apitypes.AdminPrefix + "/runs/{runId}/cancel":                               "run",
	"POST " + apitypes.AdminPrefix + "/runs/{runId}/rerun":                                "run",
	"GET " + apitypes.AdminPrefix + "/runs/{runId}/attestations":                          "run",
	"GET " + apitypes.AdminPrefix + "/generic-sources":                                    "list",
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}":                               "source",
	"DELETE " + apitypes.AdminPrefix + "/generic-sources/{id}":                            "source",
	"POST " + apitypes.AdminPrefix + "/generic-sources/{id}/enable":                       "source",
	"POST " + apitypes.AdminPrefix + "/generic-sources/{id}/disable":                      "source",
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secret":                "source",
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secrets":               "source",
	"POST " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secrets":              "source",
	"DELETE " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secrets/{secretId}": "source",
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
func (s *server) gateScoped(route string, perm auth.Permission, h http.HandlerFunc) http.Handler {
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
	return &store.AccessLogEntry{TokenID: p.TokenID, TokenLabel: p.Label, Role: string(p.Role), RoutingKey: p.RoutingKey,
		Action: action, Resource: resource, Detail: detail}
}

// ---------------------------------------------------------------- admin tokens

// selfAuditedRoutes write their access-log row in the same transaction as
// their change (security.go); the generic recorder skips them.
var selfAuditedRoutes = map[string]bool{
	"POST " + apitypes.AdminPrefix + "/tokens":                          true,
	"DELETE " + apitypes.AdminPrefix + "/tokens/{id}":                   true,
	"POST " + apitypes.AgentTokenPath:                                   true,
	"DELETE " + apitypes.AgentTokenPath + "/{id}":                       true,
	"POST " + apitypes.AdminPrefix + "/secrets/scopes":                  true,
	"PUT " + apitypes.AdminPrefix + "/secrets/{orgId}/{scope}/{key}":    true,
	"DELETE " + apitypes.AdminPrefix + "/secrets/{orgId}/{scope}/{key}": true,
	"POST " + apitypes.AdminPrefix + "/rotate-key":                      true,
	// DeleteSource commits the source.delete row with the removal.
	"DELETE " + apitypes.AdminPrefix + "/generic-sources/{id}": true,
	// The decider writes held_run.approve|reject itself; the trust-policy
	// and directory writes commit their rows with the change.
	"POST " + apitypes.AdminPrefix + "/held-runs/decision":       true,
	"PATCH " + apitypes.AdminPrefix + "/trust-policy":            true,
	"PATCH " + apitypes.AdminPrefix + "/trust-policy/directory":  true,
	"DELETE " + apitypes.AdminPrefix + "/trust-policy/directory": true,
}

// secretReadRoutes reveal a secret value on GET (webhook secrets); each
// successful call is an access-log entry.
var secretReadRoutes = map[string]bool{
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secret":  true,
	"GET " + apitypes.AdminPrefix + "/generic-sources/{id}/webhook-secrets": true,
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
