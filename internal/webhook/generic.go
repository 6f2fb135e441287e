// Package webhook is kici's inbound event ingress. The generic route
// (POST /webhook/{orgId}/generic/{name}) serves local and generic sources: it
// verifies the delivery, persists it before answering 2xx (so nothing
// accepted is lost) and hands its id to the pipeline.
//
// Status codes follow KiCI's generic webhook route (reference
// kici-admin-surface.md §1.12): 404 unknown or disabled source, 413 body over
// 10 MiB, 500 verification misconfigured, 401 bad signature, 400 missing
// event header or a body that is not JSON, 200 duplicate, 202 accepted.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
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

type genericHandler struct {
	st     store.Store
	submit func(deliveryID string)
	log    *slog.Logger
	now    func() time.Time
}

// NewGenericHandler serves POST /webhook/{orgId}/generic/{name}. The org id
// and source name come from the request's path values "orgId" and "name"
// (when mounted with that pattern on an http.ServeMux) or else from the URL
// path itself. The source is found by (org, name); it must be enabled. The
// delivery id is "<routingKey>:<X-Kici-Delivery or X-Request-ID or
// sha256(body) hex>". submit is called with the id after the delivery is
// persisted; it must not block. A nil logger discards logs. Secrets and
// bodies are never logged.
func NewGenericHandler(st store.Store, submit func(deliveryID string), logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if submit == nil {
		submit = func(string) {}
	}
	return &genericHandler{st: st, submit: submit, log: logger, now: func() time.Time { return time.Now().UTC() }}
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

// ServeHTTP handles one generic webhook delivery.
func (h *genericHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	org, name := pathParams(r)
	if org == "" || name == "" {
		fail(w, http.StatusNotFound, "source not found")
		return
	}
	ctx := r.Context()
	src, err := h.st.GetSourceByName(ctx, org, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !src.Enabled) {
		fail(w, http.StatusNotFound, "source not found")
		return
	}
	if err != nil {
		h.log.Error("webhook: source lookup failed", "orgId", org, "error", err)
		fail(w, http.StatusInternalServerError, "internal error")
		return
	}

	if r.ContentLength > MaxBodyBytes {
		fail(w, http.StatusRequestEntityTooLarge, "payload too large")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "payload too large")
			return
		}
		fail(w, http.StatusBadRequest, "could not read body")
		return
	}

	if status, msg := verify(src, r, body); status != 0 {
		if status == http.StatusInternalServerError {
			h.log.Error("webhook: verification misconfigured", "sourceId", src.ID, "method", src.VerificationMethod)
		} else {
			h.log.Warn("webhook: verification failed", "sourceId", src.ID, "remote", r.RemoteAddr)
		}
		fail(w, status, msg)
		return
	}

	event := strings.TrimSpace(r.Header.Get(HeaderEventType))
	if event == "" {
		if src.Provider == "local" {
			fail(w, http.StatusBadRequest, "missing "+HeaderEventType+" header")
			return
		}
		event = DefaultGenericEvent
	}
	if len(event) > 100 || !printable(event) {
		fail(w, http.StatusBadRequest, "invalid "+HeaderEventType+" header")
		return
	}
	if !json.Valid(body) {
		fail(w, http.StatusBadRequest, "body is not valid JSON")
		return
	}

	rawID := strings.TrimSpace(r.Header.Get(HeaderDelivery))
	if rawID == "" {
		rawID = strings.TrimSpace(r.Header.Get(HeaderRequestID))
	}
	if rawID == "" {
		sum := sha256.Sum256(body)
		rawID = hex.EncodeToString(sum[:])
	}
	if len(rawID) > MaxRawDeliveryIDLen || !printable(rawID) {
		fail(w, http.StatusBadRequest, "invalid delivery id header")
		return
	}
	id := src.RoutingKey + ":" + rawID

	d := &store.Delivery{ID: id, SourceID: src.ID, OrgID: src.OrgID, Event: event,
		Payload: json.RawMessage(body), Status: store.DeliveryReceived, ReceivedAt: h.now()}
	// Persist even if the client goes away mid-request: the answer may be
	// lost, but the delivery must not be half-accepted.
	err = h.st.InsertDelivery(context.WithoutCancel(ctx), d)
	if errors.Is(err, store.ErrConflict) {
		h.log.Info("webhook: duplicate delivery", "deliveryId", id, "sourceId", src.ID)
		writeJSON(w, http.StatusOK, Response{Accepted: true, Duplicate: true, DeliveryID: id})
		return
	}
	if err != nil {
		h.log.Error("webhook: persist delivery failed", "deliveryId", id, "error", err)
		fail(w, http.StatusInternalServerError, "could not persist delivery")
		return
	}
	h.log.Info("webhook: delivery accepted", "deliveryId", id, "sourceId", src.ID, "event", event, "bytes", len(body))
	h.submit(id)
	writeJSON(w, http.StatusAccepted, Response{Accepted: true, DeliveryID: id})
}

// verify checks the request against the source's verification method. It
// returns 0 when the request passes, else the status and message to answer.
func verify(src *store.Source, r *http.Request, body []byte) (int, string) {
	switch src.VerificationMethod {
	case VerifyHMACSHA256:
		if src.WebhookSecret == "" {
			return http.StatusInternalServerError, "verification misconfigured"
		}
		sig := r.Header.Get(HeaderSignature)
		if sig == "" {
			sig = r.Header.Get(HeaderHubSignature)
		}
		hexSig, ok := strings.CutPrefix(strings.TrimSpace(sig), "sha256=")
		if !ok {
			return http.StatusUnauthorized, "invalid signature"
		}
		got, err := hex.DecodeString(hexSig)
		if err != nil {
			return http.StatusUnauthorized, "invalid signature"
		}
		mac := hmac.New(sha256.New, []byte(src.WebhookSecret))
		mac.Write(body)
		if !hmac.Equal(got, mac.Sum(nil)) {
			return http.StatusUnauthorized, "invalid signature"
		}
		return 0, ""
	case VerifyBearerToken:
		if src.WebhookSecret == "" {
			return http.StatusInternalServerError, "verification misconfigured"
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(src.WebhookSecret)) != 1 {
			return http.StatusUnauthorized, "invalid token"
		}
		return 0, ""
	case VerifyNone:
		return 0, ""
	default:
		return http.StatusInternalServerError, "verification misconfigured"
	}
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
