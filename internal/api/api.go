// Package api serves kici's admin HTTP API (under /api/v1/admin) and the
// health/readiness probes. Shapes follow KiCI's admin surface (camelCase
// JSON); every admin route is gated by an RBAC permission; errors are always
// {"error": "..."}; every response carries X-Request-ID.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// AdminPrefix is the path prefix of every admin route.
const AdminPrefix = "/api/v1/admin"

// MaxBodyBytes caps every request body: 25 MiB (KiCI's global body limit).
const MaxBodyBytes = 25 << 20

// Permissions checked by the admin routes (see docs/admin-api.md); the
// role × permission matrix lives in package auth.
const (
	// PermRunRead gates the run, job and log read routes (all roles).
	PermRunRead = auth.PermRunRead
	// PermSourceRead gates listing and reading sources (all roles).
	PermSourceRead = auth.PermSourceRead
	// PermSourceCreate gates creating sources (owner, admin).
	PermSourceCreate = auth.PermSourceCreate
	// PermSourceSecretRead gates reading a source's webhook secret (owner, admin).
	PermSourceSecretRead = auth.PermSourceSecretRead
	// PermSourceUpdate gates rotating and revoking webhook secrets (owner, admin).
	PermSourceUpdate = auth.PermSourceUpdate
	// PermEventLogRead gates the event log and rejected deliveries (all roles).
	PermEventLogRead = auth.PermEventLogRead
	// PermEventLogReadPayload additionally gates event-log payloads (owner, admin).
	PermEventLogReadPayload = auth.PermEventLogReadPayload
	// PermContextCreate gates emitting events (KiCI: owner, admin).
	PermContextCreate = auth.PermContextCreate
	// PermContextRead gates the registration index (KiCI: all roles).
	PermContextRead = auth.PermContextRead
)

// Deps are the router's collaborators.
type Deps struct {
	// Store is the persistence layer (required).
	Store store.Store
	// Auth gates every admin route; nil ⇒ admin routes answer 503.
	Auth *auth.AdminAuth
	// Logs reads step logs; nil ⇒ the logs route answers 503.
	Logs *logstore.FS
	// Logger receives request errors; nil ⇒ discarded.
	Logger *slog.Logger
	// Ready reports readiness for GET /ready; nil = always ready.
	Ready func(ctx context.Context) error
	// Version is reported by GET /health.
	Version string
	// GitCommand is the git executable used to validate local sources;
	// "" ⇒ "git".
	GitCommand string
	// Mode is the orchestrator mode (KICI_MODE; "" = independent):
	// "observed" refuses GitHub-App sources; in platform, hybrid and
	// observed mode the held-run routes and the trust-policy writes answer
	// 409 (the KiCI Platform decides).
	Mode string
	// EmitEvent persists and submits an emitted kici_event; nil ⇒ the emit
	// route answers 503.
	EmitEvent EmitFunc
	// GitHubHTTP is the HTTP client for GitHub App validation (nil = default).
	GitHubHTTP *http.Client
	// RunControl cancels runs and holds drain mode; nil ⇒ those routes
	// answer 503.
	RunControl RunController
	// Rerun creates reruns; nil ⇒ the rerun route answers 503.
	Rerun Rerunner
	// ManualRuns starts manual runs (manualruns.go); nil ⇒ POST /runs
	// answers 503.
	ManualRuns ManualRunner
	// ClusterSettings reads and patches the live cluster settings; nil ⇒
	// the cluster-settings routes answer 503.
	ClusterSettings *cluster.Reader
	// ScalerStatus returns the scalers' state (scaler.Manager.Status); nil
	// ⇒ GET /scalers answers 503.
	ScalerStatus func() any
	// Provenance signs and verifies build provenance (provenance.go); nil
	// ⇒ the provenance routes answer 503.
	Provenance *provenance.Service
	// Secrets stores and rotates secrets (security.go); nil ⇒ the secret
	// and rotate-key routes answer 503.
	Secrets *secrets.Service
	// Cluster is the node registry and cluster-wide drain (cluster.go);
	// nil ⇒ /cluster/nodes lists no node and drain is this process only.
	Cluster ClusterNodes
	// Agents closes live connections of revoked agent tokens; nil ⇒ a
	// revocation only stops new connections.
	Agents AgentKicker
	// Approvals decides holds (approval.Decider); nil ⇒ the held-run
	// decision route answers 503.
	Approvals HoldDecider
	// Artifacts lists and serves run artifacts (artifacts.go); nil ⇒
	// those routes answer 503.
	Artifacts ArtifactService
}

type server struct {
	d   Deps
	log *slog.Logger
}

// NewRouter returns a mux with GET /health, GET /ready and the admin routes
// under /api/v1/admin:
//
//	POST/GET /generic-sources, GET/DELETE /generic-sources/{id},
//	POST /generic-sources/{id}/enable and /disable,
//	GET /generic-sources/{id}/webhook-secret,
//	GET /runs, GET /runs/{runId}, GET /runs/{runId}/jobs,
//	GET /runs/{runId}/jobs/{jobId}/steps/{i}/logs.
//
// Unknown /api/v1/admin paths answer 404 and wrong methods 405, both JSON.
// Callers mount extra handlers (/ws, /webhook/...) on the returned mux; wrap
// those with RequestID to give them X-Request-ID too.
func NewRouter(d Deps) *http.ServeMux {
	s := &server{d: d, log: d.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	s.route(mux, "/health", map[string]http.Handler{"GET": http.HandlerFunc(s.health)})
	s.route(mux, "/ready", map[string]http.Handler{"GET": http.HandlerFunc(s.ready)})

	a := func(path string, m map[string]routeSpec) {
		hs := map[string]http.Handler{}
		for method, spec := range m {
			hs[method] = s.gateScoped(method+" "+AdminPrefix+path, spec.perm, spec.h)
		}
		s.route(mux, AdminPrefix+path, hs)
	}
	a("/generic-sources", map[string]routeSpec{
		"POST": {PermSourceCreate, s.createSource},
		"GET":  {PermSourceRead, s.listSources},
	})
	a("/generic-sources/{id}", map[string]routeSpec{"GET": {PermSourceRead, s.getSource}, "DELETE": {auth.PermSourceDelete, bodyless(s.deleteSource)}})
	a("/generic-sources/{id}/enable", map[string]routeSpec{"POST": {PermSourceUpdate, bodyless(s.enableSource)}})
	a("/generic-sources/{id}/disable", map[string]routeSpec{"POST": {PermSourceUpdate, bodyless(s.disableSource)}})
	a("/generic-sources/{id}/webhook-secret", map[string]routeSpec{"GET": {PermSourceSecretRead, s.getSourceSecret}})
	a("/sources", map[string]routeSpec{"POST": {PermSourceCreate, s.createGitHubSource}})
	a("/generic-sources/{id}/webhook-secrets", map[string]routeSpec{"GET": {PermSourceSecretRead, s.listSecrets}, "POST": {PermSourceUpdate, bodyless(s.rotateSecret)}})
	a("/generic-sources/{id}/webhook-secrets/{secretId}", map[string]routeSpec{"DELETE": {PermSourceUpdate, bodyless(s.revokeSecret)}})
	a("/rejected-deliveries", map[string]routeSpec{"GET": {PermEventLogRead, s.listRejected}})
	a("/event-log", map[string]routeSpec{"GET": {PermEventLogRead, s.listEventLog}})
	a("/event-log/{deliveryId}", map[string]routeSpec{"GET": {PermEventLogRead, s.getEventLog}})
	a("/events/emit", map[string]routeSpec{"POST": {PermContextCreate, s.emitEvent}})
	a("/registrations", map[string]routeSpec{"GET": {PermContextRead, s.listRegistrations}})
	a("/registrations/{id}", map[string]routeSpec{"GET": {PermContextRead, s.getRegistration}})
	a("/runs", map[string]routeSpec{"GET": {PermRunRead, s.listRuns}, "POST": {auth.PermSourceTrigger, s.startManualRun}})
	a("/runs/{runId}", map[string]routeSpec{"GET": {PermRunRead, s.getRun}})
	a("/runs/{runId}/jobs", map[string]routeSpec{"GET": {PermRunRead, s.listJobs}})
	a("/runs/{runId}/jobs/{jobId}/steps/{i}/logs", map[string]routeSpec{"GET": {PermRunRead, s.stepLogs}})
	a("/runs/{runId}/events", map[string]routeSpec{"GET": {PermRunRead, s.runEvents}})
	a("/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream", map[string]routeSpec{"GET": {PermRunRead, s.stepLogStream}})
	a("/runs/{runId}/cancel", map[string]routeSpec{"POST": {PermRunCancel, s.cancelRun}})
	a("/runs/{runId}/rerun", map[string]routeSpec{"POST": {PermRunRerun, bodyless(s.rerunRun)}})
	a("/orchestrator/drain", map[string]routeSpec{"GET": {auth.PermSettingsRead, s.getDrain}, "POST": {PermOrchestratorDrain, s.postDrain}})
	a("/cluster/nodes", map[string]routeSpec{"GET": {auth.PermSettingsRead, s.getClusterNodes}})

	a("/cluster-settings", map[string]routeSpec{"GET": {auth.PermSettingsRead, s.getClusterSettings}, "PATCH": {auth.PermSecretWrite, s.patchClusterSettings}})
	a("/scalers", map[string]routeSpec{"GET": {auth.PermAgentRead, s.listScalers}})
	s.route(mux, "/.well-known/openid-configuration", map[string]http.Handler{"GET": http.HandlerFunc(s.openidConfiguration)})
	s.route(mux, "/.well-known/jwks.json", map[string]http.Handler{"GET": http.HandlerFunc(s.jwks)})
	s.route(mux, "/v1/verify-attestation", map[string]http.Handler{"POST": http.HandlerFunc(s.verifyAttestation)})
	a("/runs/{runId}/attestations", map[string]routeSpec{"GET": {PermRunRead, s.listAttestations}})
	a("/runs/{runId}/artifacts", map[string]routeSpec{"GET": {PermRunRead, s.listArtifacts}})
	a("/runs/{runId}/artifacts/{name}", map[string]routeSpec{"GET": {PermRunRead, s.downloadArtifact}})
	a("/attestations/{id}", map[string]routeSpec{"GET": {PermRunRead, s.getAttestation}})
	a("/signing-keys", map[string]routeSpec{"GET": {auth.PermSettingsRead, s.listSigningKeys}})
	a("/signing-keys/rotate", map[string]routeSpec{"POST": {auth.PermKeyRotate, bodyless(s.rotateSigningKey)}})
	a("/signing-keys/{kid}/revoke", map[string]routeSpec{"POST": {auth.PermKeyRotate, s.revokeSigningKey}})
	a("/tokens", map[string]routeSpec{"POST": {auth.PermTokenManage, s.createAdminToken}, "GET": {auth.PermTokenManage, s.listAdminTokens}})
	a("/tokens/{id}", map[string]routeSpec{"DELETE": {auth.PermTokenManage, bodyless(s.revokeAdminToken)}})
	s.route(mux, AgentTokenPath, map[string]http.Handler{"POST": s.gateScoped("", auth.PermAgentTokenManage, s.createAgentToken), "GET": s.gateScoped("", auth.PermAgentTokenManage, s.listAgentTokens)})
	s.route(mux, AgentTokenPath+"/{id}", map[string]http.Handler{"DELETE": s.gateScoped("", auth.PermAgentTokenManage, bodyless(s.revokeAgentToken))})
	a("/secrets/scopes", map[string]routeSpec{"GET": {auth.PermSecretList, s.listSecretScopes}, "POST": {auth.PermSecretWrite, s.createSecretScope}})
	a("/secrets/keys", map[string]routeSpec{"GET": {auth.PermSecretList, s.listSecretKeys}})
	a("/secrets/{orgId}/{scope}/{key}", map[string]routeSpec{"PUT": {auth.PermSecretWrite, s.putSecret}, "DELETE": {auth.PermSecretDelete, bodyless(s.deleteSecret)}})
	a("/rotate-key", map[string]routeSpec{"POST": {auth.PermKeyRotate, bodyless(s.rotateKey)}})
	a("/access-log", map[string]routeSpec{"GET": {auth.PermAccessLogRead, s.listAccessLog}})
	a("/contexts", map[string]routeSpec{"POST": {auth.PermSecretWrite, s.createContext}, "GET": {auth.PermContextRead, s.listContexts}})
	mux.Handle("POST "+AdminPrefix+"/contexts/templates", s.wrap(s.gateScoped("POST "+AdminPrefix+"/contexts/templates", auth.PermSecretWrite, s.createContextTemplate)))
	a("/contexts/{name}", map[string]routeSpec{"GET": {auth.PermContextRead, s.getContext}, "DELETE": {auth.PermSecretWrite, bodyless(s.deleteContext)}})
	a("/contexts/{name}/bind", map[string]routeSpec{"POST": {auth.PermSecretWrite, s.bindContext}})
	a("/contexts/{name}/policy", map[string]routeSpec{"PATCH": {auth.PermSecretWrite, s.patchContextPolicy}})
	a("/contexts/{name}/variables", map[string]routeSpec{"GET": {auth.PermContextRead, s.listContextVariables}})
	a("/contexts/{name}/variables/{key}", map[string]routeSpec{"PUT": {auth.PermSecretWrite, s.putContextVariable}, "DELETE": {auth.PermSecretDelete, bodyless(s.deleteContextVariable)}})
	a("/contexts/{name}/source-overrides", map[string]routeSpec{"GET": {auth.PermContextRead, s.listContextSourceOverrides}})
	a("/contexts/{name}/source-overrides/{key}", map[string]routeSpec{"PUT": {auth.PermSecretWrite, s.putContextSourceOverride}, "DELETE": {auth.PermSecretDelete, bodyless(s.deleteContextSourceOverride)}})
	a("/held-runs", map[string]routeSpec{"GET": {auth.PermCITrustRead, s.listHeldRuns}})
	a("/check-runs", map[string]routeSpec{"GET": {PermRunRead, s.listCheckRuns}})
	a("/held-runs/decision", map[string]routeSpec{"POST": {auth.PermCITrustAdmin, s.decideHeldRun}})
	a("/trust-policy", map[string]routeSpec{"GET": {auth.PermCITrustRead, s.getTrustPolicy}, "PATCH": {auth.PermCITrustAdmin, s.patchTrustPolicy}})
	a("/trust-policy/directory", map[string]routeSpec{"GET": {auth.PermCITrustRead, s.getTrustDirectory},
		"PATCH": {auth.PermCITrustAdmin, s.patchTrustDirectory}, "DELETE": {auth.PermCITrustAdmin, bodyless(s.deleteTrustDirectory)}})
	mux.Handle(AdminPrefix+"/", s.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not found")
	})))
	return mux
}

// Routes lists every route NewRouter registers as "METHOD path permission"
// ("-" = no authentication), for documentation and tests.
var Routes = []string{
	"GET /health -",
	"GET /ready -",
	"POST " + AdminPrefix + "/generic-sources " + PermSourceCreate,
	"GET " + AdminPrefix + "/generic-sources " + PermSourceRead,
	"GET " + AdminPrefix + "/generic-sources/{id} " + PermSourceRead,
	"DELETE " + AdminPrefix + "/generic-sources/{id} " + auth.PermSourceDelete,
	"POST " + AdminPrefix + "/generic-sources/{id}/enable " + PermSourceUpdate,
	"POST " + AdminPrefix + "/generic-sources/{id}/disable " + PermSourceUpdate,
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secret " + PermSourceSecretRead,
	"POST " + AdminPrefix + "/sources " + PermSourceCreate,
	"GET " + AdminPrefix + "/generic-sources/{id}/webhook-secrets " + PermSourceSecretRead,
	"POST " + AdminPrefix + "/generic-sources/{id}/webhook-secrets " + PermSourceUpdate,
	"DELETE " + AdminPrefix + "/generic-sources/{id}/webhook-secrets/{secretId} " + PermSourceUpdate,
	"GET " + AdminPrefix + "/rejected-deliveries " + PermEventLogRead,
	"GET " + AdminPrefix + "/event-log " + PermEventLogRead,
	"GET " + AdminPrefix + "/event-log/{deliveryId} " + PermEventLogRead,
	"POST " + AdminPrefix + "/events/emit " + PermContextCreate,
	"GET " + AdminPrefix + "/registrations " + PermContextRead,
	"GET " + AdminPrefix + "/registrations/{id} " + PermContextRead,
	"GET " + AdminPrefix + "/runs " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId} " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/jobs " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/events " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream " + PermRunRead,
	"POST " + AdminPrefix + "/runs/{runId}/cancel " + PermRunCancel,
	"POST " + AdminPrefix + "/runs/{runId}/rerun " + PermRunRerun,
	"GET " + AdminPrefix + "/orchestrator/drain " + auth.PermSettingsRead,
	"POST " + AdminPrefix + "/orchestrator/drain " + PermOrchestratorDrain,
	"GET " + AdminPrefix + "/cluster/nodes " + auth.PermSettingsRead,
	"GET " + AdminPrefix + "/cluster-settings " + auth.PermSettingsRead,
	"PATCH " + AdminPrefix + "/cluster-settings " + auth.PermSecretWrite,
	"GET " + AdminPrefix + "/scalers " + auth.PermAgentRead,
	"GET /.well-known/openid-configuration -",
	"GET /.well-known/jwks.json -",
	"POST /v1/verify-attestation -",
	"GET " + AdminPrefix + "/runs/{runId}/attestations " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/artifacts " + PermRunRead,
	"GET " + AdminPrefix + "/runs/{runId}/artifacts/{name} " + PermRunRead,
	"GET " + AdminPrefix + "/attestations/{id} " + PermRunRead,
	"GET " + AdminPrefix + "/signing-keys " + auth.PermSettingsRead,
	"POST " + AdminPrefix + "/signing-keys/rotate " + auth.PermKeyRotate,
	"POST " + AdminPrefix + "/signing-keys/{kid}/revoke " + auth.PermKeyRotate,
	"POST " + AdminPrefix + "/tokens " + auth.PermTokenManage,
	"GET " + AdminPrefix + "/tokens " + auth.PermTokenManage,
	"DELETE " + AdminPrefix + "/tokens/{id} " + auth.PermTokenManage,
	"POST " + AgentTokenPath + " " + auth.PermAgentTokenManage,
	"GET " + AgentTokenPath + " " + auth.PermAgentTokenManage,
	"DELETE " + AgentTokenPath + "/{id} " + auth.PermAgentTokenManage,
	"GET " + AdminPrefix + "/secrets/scopes " + auth.PermSecretList,
	"POST " + AdminPrefix + "/secrets/scopes " + auth.PermSecretWrite,
	"GET " + AdminPrefix + "/secrets/keys " + auth.PermSecretList,
	"DELETE " + AdminPrefix + "/secrets/scopes/{orgId}/{scope} " + auth.PermSecretDelete,
	"PUT " + AdminPrefix + "/secrets/{orgId}/{scope}/{key} " + auth.PermSecretWrite,
	"DELETE " + AdminPrefix + "/secrets/{orgId}/{scope}/{key} " + auth.PermSecretDelete,
	"POST " + AdminPrefix + "/rotate-key " + auth.PermKeyRotate,
	"GET " + AdminPrefix + "/access-log " + auth.PermAccessLogRead,
	"POST " + AdminPrefix + "/contexts " + auth.PermSecretWrite,
	"GET " + AdminPrefix + "/contexts " + auth.PermContextRead,
	"POST " + AdminPrefix + "/contexts/templates " + auth.PermSecretWrite,
	"GET " + AdminPrefix + "/contexts/{name} " + auth.PermContextRead,
	"DELETE " + AdminPrefix + "/contexts/{name} " + auth.PermSecretWrite,
	"POST " + AdminPrefix + "/contexts/{name}/bind " + auth.PermSecretWrite,
	"PATCH " + AdminPrefix + "/contexts/{name}/policy " + auth.PermSecretWrite,
	"GET " + AdminPrefix + "/contexts/{name}/variables " + auth.PermContextRead,
	"PUT " + AdminPrefix + "/contexts/{name}/variables/{key} " + auth.PermSecretWrite,
	"DELETE " + AdminPrefix + "/contexts/{name}/variables/{key} " + auth.PermSecretDelete,
	"GET " + AdminPrefix + "/contexts/{name}/source-overrides " + auth.PermContextRead,
	"PUT " + AdminPrefix + "/contexts/{name}/source-overrides/{key} " + auth.PermSecretWrite,
	"DELETE " + AdminPrefix + "/contexts/{name}/source-overrides/{key} " + auth.PermSecretDelete,
	"GET " + AdminPrefix + "/held-runs " + auth.PermCITrustRead,
	"GET " + AdminPrefix + "/check-runs " + PermRunRead,
	"POST " + AdminPrefix + "/held-runs/decision " + auth.PermCITrustAdmin,
	"GET " + AdminPrefix + "/trust-policy " + auth.PermCITrustRead,
	"PATCH " + AdminPrefix + "/trust-policy " + auth.PermCITrustAdmin,
	"GET " + AdminPrefix + "/trust-policy/directory " + auth.PermCITrustRead,
	"PATCH " + AdminPrefix + "/trust-policy/directory " + auth.PermCITrustAdmin,
	"DELETE " + AdminPrefix + "/trust-policy/directory " + auth.PermCITrustAdmin,
}

type routeSpec struct {
	perm string
	h    http.HandlerFunc
}

// route registers "METHOD path" for each method, plus a method-less pattern
// answering 405 JSON with an Allow header.
func (s *server) route(mux *http.ServeMux, path string, hs map[string]http.Handler) {
	methods := make([]string, 0, len(hs))
	for m, h := range hs {
		methods = append(methods, m)
		mux.Handle(m+" "+path, s.wrap(h))
	}
	sort.Strings(methods)
	allow := strings.Join(methods, ", ")
	mux.Handle(path, s.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s not allowed (allowed: %s)", r.Method, allow))
	})))
}

// gate puts h behind the authorizer with perm; without one the route is
// unavailable (fail closed).
func (s *server) gate(perm string, h http.HandlerFunc) http.Handler {
	if s.d.Auth == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "Admin API not available")
		})
	}
	return s.d.Auth.Require(perm, h)
}

// wrap applies the common middleware: request id, body cap, panic recovery.
func (s *server) wrap(h http.Handler) http.Handler {
	return RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("api: panic", "path", r.URL.Path, "panic", v, "requestId", w.Header().Get(RequestIDHeader))
				writeError(w, http.StatusInternalServerError, "Internal server error")
			}
		}()
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		}
		h.ServeHTTP(w, r)
	}))
}

// RequestIDHeader is the request/response correlation header.
const RequestIDHeader = "X-Request-ID"

// RequestID sets X-Request-ID on the response: the incoming header when it is
// a sane token (≤ 128 printable ASCII characters), else a new UUID. When the
// response already carries one (an outer RequestID), it is kept.
func RequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if w.Header().Get(RequestIDHeader) == "" {
			id := r.Header.Get(RequestIDHeader)
			if !saneID(id) {
				id = uuid.NewString()
			}
			w.Header().Set(RequestIDHeader, id)
		}
		h.ServeHTTP(w, r)
	})
}

func saneID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// internalError logs err and answers 500.
func (s *server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "error", err, "requestId", w.Header().Get(RequestIDHeader))
	writeError(w, http.StatusInternalServerError, "Internal server error")
}

// decodeBody decodes exactly one JSON object into dst, rejecting unknown
// fields and trailing data. It writes the error response itself (400, or 413
// past MaxBodyBytes) and reports false on failure.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body too large (limit %d bytes)", mbe.Limit))
		return false
	}
	if errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "Invalid JSON body: empty body")
		return false
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		writeError(w, http.StatusBadRequest, "Invalid JSON body: "+typeErrorMsg(te, dst))
		return false
	}
	writeError(w, http.StatusBadRequest, "Invalid JSON body: "+strings.TrimPrefix(err.Error(), "json: "))
	return false
}

// typeErrorMsg says which field has the wrong JSON type in the client's
// terms ("request body must be a JSON object", "field name must be a
// string", "field tags must be an array of strings"); encoding/json's own
// text names Go types and struct tags, which mean nothing to a client and
// leak implementation detail. dst is the value decodeBody decoded into.
func typeErrorMsg(te *json.UnmarshalTypeError, dst any) string {
	if te.Field == "" {
		return "request body must be " + describeJSONType(te.Type)
	}
	// Field is the dotted path from the body's root and names embedded
	// structs by their Go type; the last element is what the client wrote.
	field := te.Field
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		field = field[i+1:]
	}
	t := te.Type
	if ft, ok := jsonFieldType(reflect.TypeOf(dst), field); ok {
		t = ft // the whole field's type: an array's element type alone would mislead
	}
	return fmt.Sprintf("field %s must be %s", field, describeJSONType(t))
}

// jsonFieldType finds the Go type of the field a struct (or pointer to
// one) decodes JSON key name into, looking through embedded structs.
func jsonFieldType(t reflect.Type, name string) (reflect.Type, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if ft, ok := jsonFieldType(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f.Type, true
		}
	}
	return nil, false
}

// describeJSONType names the JSON shape a Go type decodes from.
func describeJSONType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + pluralJSONType(t.Elem())
	case reflect.Map:
		return "a JSON object of " + pluralJSONType(t.Elem())
	case reflect.Struct:
		return "a JSON object"
	}
	return "a JSON value"
}

func pluralJSONType(t reflect.Type) string {
	switch d := describeJSONType(t); d {
	case "a string", "a boolean", "a number":
		return d[2:] + "s"
	case "an integer":
		return "integers"
	case "a JSON object":
		return "JSON objects"
	}
	return "values"
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.d.Version})
}

func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if s.d.Ready != nil {
		if err := s.d.Ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "error": "Not ready: " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
