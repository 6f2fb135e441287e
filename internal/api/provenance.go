package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/store"
)

// Provenance routes (see docs/kici-compatibility.md#provenance):
// the public OIDC discovery
// document, JWKS and verify endpoint, and the admin attestation and signing
// key routes. Deps.Provenance nil ⇒ all of them answer 503.

// corsAll marks a public /.well-known response readable from any origin.
func corsAll(w http.ResponseWriter) { w.Header().Set("Access-Control-Allow-Origin", "*") }

// publicError writes {"error": code} (KiCI's public error shape).
func publicError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

// GET /.well-known/openid-configuration
func (s *server) openidConfiguration(w http.ResponseWriter, r *http.Request) {
	corsAll(w)
	p := s.d.Provenance
	if !p.Enabled() {
		publicError(w, http.StatusServiceUnavailable, "oidc_issuer_not_configured")
		return
	}
	writeJSON(w, http.StatusOK, provenance.Discovery(p.Issuer()))
}

// GET /.well-known/jwks.json
func (s *server) jwks(w http.ResponseWriter, r *http.Request) {
	corsAll(w)
	if s.d.Provenance == nil {
		publicError(w, http.StatusServiceUnavailable, "no_published_keys")
		return
	}
	set, err := s.d.Provenance.Keys().JWKS(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if len(set.Keys) == 0 {
		publicError(w, http.StatusServiceUnavailable, "no_published_keys")
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, http.StatusOK, set)
}

// verifyRequest is the body of POST /v1/verify-attestation. Bundle is the
// bundle object (a JSON string holding it is accepted too); Digest is
// {alg, hex} or "sha256:<hex>".
type verifyRequest struct {
	Bundle   json.RawMessage `json:"bundle"`
	Audience string          `json:"audience"`
	Digest   json.RawMessage `json:"digest"`
}

// POST /v1/verify-attestation: the verification verdict, always 200 once
// verification runs.
func (s *server) verifyAttestation(w http.ResponseWriter, r *http.Request) {
	p := s.d.Provenance
	if !p.Enabled() {
		publicError(w, http.StatusServiceUnavailable, "provenance_signing_not_configured")
		return
	}
	body, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		publicError(w, http.StatusRequestEntityTooLarge, "payload_too_large")
		return
	}
	var req verifyRequest
	if err != nil || json.Unmarshal(body, &req) != nil {
		publicError(w, http.StatusBadRequest, "invalid_json")
		return
	}
	bundle := req.Bundle
	var asString string
	if json.Unmarshal(bundle, &asString) == nil {
		bundle = json.RawMessage(asString)
	}
	if len(bundle) == 0 || string(bundle) == "null" {
		publicError(w, http.StatusBadRequest, "bundle_required")
		return
	}
	var digest *provenance.Digest
	if len(req.Digest) > 0 && string(req.Digest) != "null" {
		d, ok := parseDigestField(req.Digest)
		if !ok {
			publicError(w, http.StatusBadRequest, "invalid_digest")
			return
		}
		digest = d
	}
	v, err := p.Verify(r.Context(), bundle, req.Audience, digest)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// parseDigestField accepts {"alg":"sha256","hex":"…"} or "sha256:<hex>".
func parseDigestField(raw json.RawMessage) (*provenance.Digest, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		hex, err := provenance.ParseDigest(s)
		if err != nil {
			return nil, false
		}
		return &provenance.Digest{Alg: "sha256", Hex: hex}, true
	}
	var d provenance.Digest
	if json.Unmarshal(raw, &d) != nil || d.Alg == "" || d.Hex == "" {
		return nil, false
	}
	d.Hex = strings.ToLower(d.Hex)
	return &d, true
}

// GET /api/v1/admin/runs/{runId}/attestations
func (s *server) listAttestations(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("runId")
	if _, err := s.d.Store.GetRun(r.Context(), runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "Run not found")
			return
		}
		s.internalError(w, r, err)
		return
	}
	list, err := s.d.Store.ListAttestations(r.Context(), runID)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.AttestationList{Attestations: derefAll(list)})
}

// GET /api/v1/admin/attestations/{id}
func (s *server) getAttestation(w http.ResponseWriter, r *http.Request) {
	a, err := s.d.Store.GetAttestation(r.Context(), r.PathValue("id"))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "Attestation not found")
			return
		}
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// keysAvailable answers 503 when signing is not configured.
func (s *server) keysAvailable(w http.ResponseWriter) bool {
	if !s.d.Provenance.Enabled() {
		writeError(w, http.StatusServiceUnavailable, "Provenance signing is not configured (set KICI_ORCHESTRATOR_PROVENANCE_ISSUER)")
		return false
	}
	return true
}

// GET /api/v1/admin/signing-keys
func (s *server) listSigningKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.d.Store.ListSigningKeys(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.SigningKeyList{Keys: mapSlice(list, signingKeyView)})
}

// POST /api/v1/admin/signing-keys/rotate
func (s *server) rotateSigningKey(w http.ResponseWriter, r *http.Request) {
	if !s.keysAvailable(w) {
		return
	}
	k, err := s.d.Provenance.Keys().Rotate(r.Context())
	if errors.Is(err, store.ErrConflict) {
		writeError(w, http.StatusConflict, "A concurrent rotation won; list the keys and retry if needed")
		return
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, signingKeyView(k))
}

// POST /api/v1/admin/signing-keys/{kid}/revoke {reason}
func (s *server) revokeSigningKey(w http.ResponseWriter, r *http.Request) {
	if !s.keysAvailable(w) {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	body.Reason = strings.TrimSpace(body.Reason)
	if body.Reason == "" || len(body.Reason) > 500 {
		writeError(w, http.StatusBadRequest, "reason is required (at most 500 characters)")
		return
	}
	kid := r.PathValue("kid")
	changed, err := s.d.Provenance.Keys().Revoke(r.Context(), kid, body.Reason)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Signing key not found")
		return
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	if !changed {
		writeError(w, http.StatusConflict, "Signing key is already revoked")
		return
	}
	k, err := s.d.Store.GetSigningKey(r.Context(), kid)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, signingKeyView(k))
}
