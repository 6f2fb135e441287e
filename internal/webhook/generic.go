// Package webhook is kici's inbound event ingress. The generic route
// (POST /webhook/{orgId}/generic/{name}) serves local and generic sources: it
// verifies the delivery, persists it before answering 2xx (so nothing
// accepted is lost) and hands its id to the pipeline.
//
// The GitHub route (POST /webhook/{orgId}/github/{sourceId}) serves GitHub
// sources the same way. Status codes follow KiCI's routes
// (see docs/kici-compatibility.md#ingress); see Ingress.Generic and Ingress.GitHub.
package webhook

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/universal"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// MaxBodyBytes caps a generic webhook body: 10 MiB.
const MaxBodyBytes = 10 << 20

// MaxRawDeliveryIDLen caps the client-chosen part of a delivery id
// (X-Kici-Delivery / X-Request-ID).
const MaxRawDeliveryIDLen = 200

// Request headers read by the generic route.
const (
	// HeaderSignature carries "sha256=<hex>" HMAC-SHA256 of the raw body.
	HeaderSignature = "X-Kici-Signature-256"
	// HeaderHubSignature is the GitHub-style alternative to HeaderSignature.
	HeaderHubSignature = "X-Hub-Signature-256"
	// HeaderEventType names the event (e.g. "push").
	HeaderEventType = "X-Event-Type"
	// HeaderDelivery is the sender's delivery id (idempotency key).
	HeaderDelivery = "X-Kici-Delivery"
	// HeaderRequestID is the fallback idempotency key.
	HeaderRequestID = "X-Request-ID"
)

// Verification methods of a source (store.Source.VerificationMethod).
const (
	VerifyHMACSHA256  = "hmac_sha256"
	VerifyBearerToken = "bearer_token"
	VerifyIPAllowlist = "ip_allowlist"
	VerifyNone        = "none"
)

// DefaultGenericEvent is the event name of a generic-source delivery that
// carries no X-Event-Type header.
const DefaultGenericEvent = "default"

// Response is the JSON body of every answer of the generic route. Error is
// set on 4xx/5xx only.
type Response struct {
	Accepted   bool   `json:"accepted"`
	Duplicate  bool   `json:"duplicate,omitempty"`
	DeliveryID string `json:"deliveryId,omitempty"`
	Error      string `json:"error,omitempty"`
}

// NewGenericHandler serves POST /webhook/{orgId}/generic/{name} with the
// default Options; see Ingress.Generic.
func NewGenericHandler(st store.Store, submit Submitter, logger *slog.Logger) http.Handler {
	return NewIngress(st, submit, Options{Logger: logger}).Generic()
}

func writeJSON(w http.ResponseWriter, status int, body Response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, Response{Accepted: false, Error: msg})
}

// pathParams extracts orgId and name, from the mux path values or from a
// ".../webhook/<org>/generic/<name>" URL path.
func pathParams(r *http.Request) (org, name string) {
	org, name = r.PathValue("orgId"), r.PathValue("name")
	if org != "" && name != "" {
		return org, name
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i := 0; i+3 < len(parts); i++ {
		if parts[i] == "webhook" && parts[i+2] == "generic" && i+4 == len(parts) {
			return parts[i+1], parts[i+3]
		}
	}
	return "", ""
}

// Generic returns the handler of POST /webhook/{orgId}/generic/{name}. The
// org id and source name come from the request's path values "orgId" and
// "name" (when mounted with that pattern on an http.ServeMux) or else from
// the URL path itself. In order (KiCI's generic route; see
// docs/kici-compatibility.md#ingress):
// the source is found by (org, name) (404 "source not found") and must
// be enabled (404 MsgSourceDisabled, with a rejected-delivery record); the
// body is capped at MaxBodyBytes and at the source's own cap, default
// 1 MiB (413); the source's verification method must pass (401; 500 when
// misconfigured); the per-source rate limit applies (429 with
// Retry-After); X-Event-Type names the event (required for local sources,
// else "default"; 400) and the body must be JSON (400). The delivery id is
// "<routingKey>:<X-Kici-Delivery or X-Request-ID or sha256(body) hex>";
// a replay answers 200 duplicate. Secrets and bodies are never logged.
func (in *Ingress) Generic() http.Handler {
	return http.HandlerFunc(in.serveGeneric)
}

func (in *Ingress) serveGeneric(w http.ResponseWriter, r *http.Request) {
	if !postOnly(w, r) {
		return
	}
	org, name := pathParams(r)
	var is *store.IngressSource
	err := store.ErrNotFound
	if org != "" && name != "" {
		is, err = in.st.GetIngressSourceByName(r.Context(), org, name)
	}
	if err == nil && is.Source.Provider == provider.GitHub {
		err = store.ErrNotFound // GitHub sources have their own route
	}
	q := in.admit(w, r, genericRoute, is, err, "orgId", org)
	if q == nil {
		return
	}
	src, set := q.src, q.set
	eventHeader := HeaderEventType
	if set.Git != nil {
		if h := universal.EventHeader(set.Git.Preset); h != "" {
			eventHeader = h
		}
		for _, h := range forgeDeliveryHeaders {
			if q.rawID == "" {
				q.rawID = strings.TrimSpace(r.Header.Get(h))
			}
		}
	}
	if q.rawID == "" {
		q.rawID = strings.TrimSpace(r.Header.Get(HeaderRequestID))
	}
	q.event = strings.TrimSpace(r.Header.Get(eventHeader))
	if q.event == "" && set.Git != nil && set.Git.Preset == universal.PresetForgejo {
		q.event = strings.TrimSpace(r.Header.Get("X-Gitea-Event"))
	}

	limit := set.MaxPayloadBytes
	if limit <= 0 {
		limit = DefaultSourceMaxPayloadBytes
	}
	if !q.readBody(min(limit, MaxBodyBytes)) {
		return
	}
	body := q.body

	status, msg, err := verifyGeneric(q, r, body)
	if err != nil {
		q.internalError("secrets lookup", err)
		return
	}
	if status != 0 {
		q.reject(status, msg)
		return
	}
	if !q.withinRateLimit(set.RateLimitRPM) {
		return
	}

	if q.event == "" {
		if src.Provider == provider.Local || set.Git != nil {
			q.reject(http.StatusBadRequest, "missing "+eventHeader+" header")
			return
		}
		q.event = DefaultGenericEvent
	}
	if len(q.event) > 100 || !eventName(q.event) {
		q.reject(http.StatusBadRequest, "invalid "+eventHeader+" header")
		return
	}
	if !json.Valid(body) {
		q.reject(http.StatusBadRequest, "body is not valid JSON")
		return
	}
	if set.IdempotencyKeyHeader != "" || set.IdempotencyKeyPath != "" {
		key, where := idempotencyKey(r, body, set)
		if key == "" {
			q.reject(http.StatusBadRequest, "missing idempotency key ("+where+")")
			return
		}
		q.rawID = key
	}
	if q.rawID == "" {
		sum := sha256.Sum256(body)
		q.rawID = hex.EncodeToString(sum[:])
	}
	if len(q.rawID) > MaxRawDeliveryIDLen || !printable(q.rawID) {
		q.reject(http.StatusBadRequest, "invalid delivery id header")
		return
	}
	head := readHead(body)
	action := head.Action
	if src.Provider != provider.Local && set.Git == nil && q.event != DefaultGenericEvent {
		// A plain generic source's event name is its action.
		action = q.event
	}
	q.accept(action, head.Repository.FullName, head.Ref)
}

// forgeDeliveryHeaders carry a forge's delivery id (universal-git sources).
var forgeDeliveryHeaders = []string{"X-Forgejo-Delivery", "X-Gitea-Delivery", "X-Gogs-Delivery", "X-Gitlab-Event-UUID", HeaderGitHubDelivery}

// verifyGeneric checks the request against the source's verification
// method. It returns status 0 when the request passes, else the status and
// message to answer (500 = misconfigured source).
func verifyGeneric(q *request, r *http.Request, body []byte) (int, string, error) {
	src, set := q.src, q.set
	switch src.VerificationMethod {
	case VerifyHMACSHA256, VerifyBearerToken:
		secrets, err := q.activeSecrets()
		if err != nil {
			return 0, "", err
		}
		if len(secrets) == 0 {
			return http.StatusInternalServerError, "verification misconfigured", nil
		}
		if src.VerificationMethod == VerifyHMACSHA256 {
			var sig string
			if set.SignatureHeader != "" {
				sig = r.Header.Get(set.SignatureHeader)
			} else if sig = r.Header.Get(HeaderSignature); sig == "" {
				sig = r.Header.Get(HeaderHubSignature)
			}
			if sig == "" && set.Git != nil {
				sig = r.Header.Get(presetSignatureHeader(set.Git.Preset))
			}
			if !VerifyHMAC(sig, body, secrets) && !verifyBareHMAC(sig, body, secrets) {
				return http.StatusUnauthorized, "invalid signature", nil
			}
			return 0, "", nil
		}
		var tok string
		if set.TokenHeader != "" && !strings.EqualFold(set.TokenHeader, "Authorization") {
			tok = r.Header.Get(set.TokenHeader)
		} else {
			t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return http.StatusUnauthorized, "invalid token", nil
			}
			tok = t
		}
		match := 0
		for _, s := range secrets {
			match |= subtle.ConstantTimeCompare([]byte(tok), []byte(s))
		}
		if tok == "" || match != 1 {
			return http.StatusUnauthorized, "invalid token", nil
		}
		return 0, "", nil
	case VerifyIPAllowlist:
		if len(set.IPAllowlist) == 0 {
			return http.StatusInternalServerError, "verification misconfigured", nil
		}
		ip := clientIP(r)
		for _, a := range set.IPAllowlist {
			if a == ip {
				return 0, "", nil
			}
		}
		return http.StatusUnauthorized, "client address not allowed", nil
	case VerifyNone:
		return 0, "", nil
	default:
		return http.StatusInternalServerError, "verification misconfigured", nil
	}
}

// eventName reports whether s is a usable event name: printable ASCII,
// inner spaces allowed (every GitLab event name has one, "Push Hook"), no
// leading or trailing space, no control characters.
func eventName(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// presetSignatureHeader is the HMAC header a forge preset signs with when
// the source names none: Gitea, Forgejo and Gogs send the bare hex
// HMAC-SHA256 of the body (Gitea docs, "Webhooks": X-Gitea-Signature;
// Forgejo also sends X-Forgejo-Signature; Gogs X-Gogs-Signature).
func presetSignatureHeader(preset string) string {
	switch preset {
	case universal.PresetGitea:
		return "X-Gitea-Signature"
	case universal.PresetForgejo:
		return "X-Forgejo-Signature"
	case universal.PresetGogs:
		return "X-Gogs-Signature"
	}
	return ""
}

// verifyBareHMAC checks a signature given as bare lowercase or uppercase
// hex (no "sha256=" prefix), the form Gitea, Forgejo and Gogs send, against
// every secret in constant time.
func verifyBareHMAC(header string, body []byte, secrets []string) bool {
	h := strings.TrimSpace(header)
	if len(h) != sha256.Size*2 {
		return false
	}
	return VerifyHMAC("sha256="+h, body, secrets)
}

// printable reports whether s is non-empty visible ASCII (no spaces or
// control characters).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}

// idempotencyKey returns the delivery's idempotency key from the header or
// JSONPath the source names (KiCI idempotencyKeyHeader/idempotencyKeyPath),
// and where it was looked for. A JSONPath must select exactly one string or
// number; anything else counts as missing.
func idempotencyKey(r *http.Request, body []byte, set *store.SourceSettings) (key, where string) {
	if h := set.IdempotencyKeyHeader; h != "" {
		return strings.TrimSpace(r.Header.Get(h)), "header " + h
	}
	where = "body path " + set.IdempotencyKeyPath
	p, err := trigger.CompileJSONPath(set.IdempotencyKeyPath)
	if err != nil {
		return "", where
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep 64-bit ids exact
	if dec.Decode(&doc) != nil {
		return "", where
	}
	got := trigger.EvalJSONPath(p, doc)
	if len(got) != 1 {
		return "", where
	}
	switch v := got[0].(type) {
	case string:
		return strings.TrimSpace(v), where
	case json.Number:
		return v.String(), where
	}
	return "", where
}
