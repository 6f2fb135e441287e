package apitypes

import (
	"encoding/json"
	"time"
)

// SigningKey is a provenance signing key as GET /signing-keys and the
// rotate/revoke routes return it: the public half only.
type SigningKey struct {
	Kid string `json:"kid"`
	// PublicJWK is the public half as a JWK (EC P-256, alg ES256, use sig).
	PublicJWK json.RawMessage `json:"publicJwk"`
	// Alg is always ES256.
	Alg string `json:"alg"`
	// SignerKind is "db" (the only custody this build implements).
	SignerKind string `json:"signerKind"`
	// Status is active, retiring, retired or revoked.
	Status           SigningKeyStatus `json:"status"`
	RevocationReason string           `json:"revocationReason,omitempty"`
	CreatedAt        time.Time        `json:"createdAt"`
	ActivatedAt      *time.Time       `json:"activatedAt,omitempty"`
	RetiredAt        *time.Time       `json:"retiredAt,omitempty"`
	RevokedAt        *time.Time       `json:"revokedAt,omitempty"`
}

// Attestation is one provenance bundle of one subject of one job (GET
// /runs/{runId}/attestations, GET /attestations/{id}).
type Attestation struct {
	ID    string `json:"id"`
	RunID string `json:"runId"`
	JobID string `json:"jobId"`
	// SubjectName is the artifact name (e.g. "dist/app.tar.gz").
	SubjectName string `json:"subjectName"`
	// SubjectDigest is "sha256:<64 lowercase hex>".
	SubjectDigest string `json:"subjectDigest"`
	// Kid is the signing key that signed the bundle.
	Kid string `json:"kid"`
	// Bundle is the kici provenance bundle JSON (absent when not stored).
	Bundle    json.RawMessage `json:"bundle,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
}
