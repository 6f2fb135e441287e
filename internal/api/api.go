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

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/netguard"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/store"
)

// MaxBodyBytes caps every request body: 25 MiB (KiCI's global body limit).
const MaxBodyBytes = 25 << 20

// Deps are the router's collaborators.
type Deps struct {
	// Store is the persistence layer (required).
	Store store.Store
	// Auth gates every admin route; nil ⇒ admin routes answer 503.
	Auth *auth.AdminAuth
	// Logs reads step logs; nil ⇒ the logs route answers 503.
	Logs logstore.Store
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
	Mode config.Mode
	// EmitEvent persists and submits an emitted kici_event; nil ⇒ the emit
	// route answers 503.
	EmitEvent EmitFunc
	// GitHubHTTP is the HTTP client for GitHub App validation (nil = default).
	GitHubHTTP *http.Client
	// SourceURLs decides which addresses a source's forge URLs may reach
	// (internal/netguard); nil refuses loopback, link-local and this
	// host's own addresses, as the zero Guard does.
	SourceURLs *netguard.Guard
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
	// ScalerStatus returns the scalers' state (scaler.Manager.Status with
	// each agent's job); nil ⇒ GET /scalers answers 503.
	ScalerStatus func() scaler.Status
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

// NewRouter returns a mux serving every route of the route table
// (routes.go): GET /health, GET /ready, the OIDC/provenance documents and
// the admin routes under /api/v1/admin, each admin route behind its RBAC
// permission. Routes lists them; GET /api/v1/admin/openapi.json describes
// them.
//
// Unknown /api/v1/admin paths answer 404 and wrong methods 405, both JSON.
// Callers mount extra handlers (/ws, /webhook/...) on the returned mux; wrap
// those with RequestID to give them X-Request-ID too.
func NewRouter(d Deps) *http.ServeMux {
	mux, _ := newRouter(d)
	return mux
}

// newRouter builds NewRouter's mux and also returns the "METHOD path"
// patterns it mounted, so a test can hold the OpenAPI document against what
// is really served.
func newRouter(d Deps) (*http.ServeMux, []string) {
	s := &server{d: d, log: d.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mounted := s.mount(mux)
	mux.Handle(apitypes.AdminPrefix+"/", s.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not found")
	})))
	return mux, mounted
}

// handlePath registers "METHOD path" for each method, plus a method-less pattern
// answering 405 JSON with an Allow header.
func (s *server) handlePath(mux *http.ServeMux, path string, hs map[string]http.Handler) {
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
func (s *server) gate(perm auth.Permission, h http.HandlerFunc) http.Handler {
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
	writeJSON(w, http.StatusOK, apitypes.Health{Status: "ok", Version: s.d.Version})
}

func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if s.d.Ready != nil {
		if err := s.d.Ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "error": "Not ready: " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, apitypes.Readiness{Status: "ready"})
}
