package store

import (
	"context"
	"encoding/json"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// SigningKeyStatus is the state of a signing key; apitypes', as the admin
// API serves it.
type SigningKeyStatus = apitypes.SigningKeyStatus

// Signing key statuses (see docs/kici-compatibility.md#provenance).
// Exactly one key is active; rotation demotes the active key to
// retiring and any retiring key to retired in the same transaction. The
// trusted (published) set is active + retiring + retired; a revoked key is
// never published again and can never be reactivated. The words are
// apitypes', as the admin API serves them.
const (
	SigningKeyActive   = apitypes.SigningKeyActive
	SigningKeyRetiring = apitypes.SigningKeyRetiring
	SigningKeyRetired  = apitypes.SigningKeyRetired
	SigningKeyRevoked  = apitypes.SigningKeyRevoked
)

// SigningKey is one orchestrator provenance signing key
// (orchestrator_signing_keys). Kid is the RFC 7638 SHA-256 thumbprint of the
// public JWK. The row holds the sealed private half, which is never served:
// this is why it is not apitypes.SigningKey, which package api copies it
// into without that field.
type SigningKey struct {
	Kid string `json:"kid"`
	// PublicJWK is the public half as a JWK (EC P-256, alg ES256, use sig).
	PublicJWK json.RawMessage `json:"publicJwk"`
	// EncryptedPrivateJWK is the private JWK sealed under the master key
	// (AAD "orchestrator-signing-key"); never serialised.
	EncryptedPrivateJWK []byte `json:"-"`
	// Alg is always ES256.
	Alg string `json:"alg"`
	// SignerKind is "db" (the only custody this build implements).
	SignerKind string `json:"signerKind"`
	// Status is one of the SigningKey* constants.
	Status           apitypes.SigningKeyStatus `json:"status"`
	RevocationReason string                    `json:"revocationReason,omitempty"`
	CreatedAt        time.Time                 `json:"createdAt"`
	ActivatedAt      *time.Time                `json:"activatedAt,omitempty"`
	RetiredAt        *time.Time                `json:"retiredAt,omitempty"`
	RevokedAt        *time.Time                `json:"revokedAt,omitempty"`
}

// Attestation is one stored provenance bundle: one subject of one job,
// keyed like KiCI's storage key provenance/{runId}/{jobId}/{subjectDigest}.kici.json;
// the admin API serves it as it is (a list leaves Bundle out).
type Attestation = apitypes.Attestation

// ProvenanceStore persists signing keys and attestation bundles.
type ProvenanceStore interface {
	// CreateActiveSigningKey inserts k with status active. ErrConflict when
	// an active key already exists (the database guarantees at most one,
	// so two orchestrators sharing a database never both create one) or
	// the kid exists.
	CreateActiveSigningKey(ctx context.Context, k *SigningKey) error
	// RotateSigningKey, in one transaction, moves a retiring key to
	// retired, the active key to retiring and inserts k as active.
	// ErrConflict when a concurrent rotation won.
	RotateSigningKey(ctx context.Context, k *SigningKey) error
	// GetSigningKey returns a key by kid, or ErrNotFound.
	GetSigningKey(ctx context.Context, kid string) (*SigningKey, error)
	// GetActiveSigningKey returns the active key, or ErrNotFound.
	GetActiveSigningKey(ctx context.Context) (*SigningKey, error)
	// ListSigningKeys returns every key, newest first.
	ListSigningKeys(ctx context.Context) ([]*SigningKey, error)
	// RevokeSigningKey marks a key revoked with reason at `at`; it reports
	// false (nothing changed) when the key was already revoked, and
	// ErrNotFound for an unknown kid.
	RevokeSigningKey(ctx context.Context, kid, reason string, at time.Time) (bool, error)

	// PutAttestation stores a bundle; a second bundle for the same (RunID,
	// JobID, SubjectDigest) replaces the first (ID and CreatedAt are then
	// those of the new one). ErrNotFound when the run does not exist.
	PutAttestation(ctx context.Context, a *Attestation) error
	// GetAttestation returns a bundle by id, or ErrNotFound.
	GetAttestation(ctx context.Context, id string) (*Attestation, error)
	// ListAttestations returns the bundles of a run, oldest first.
	ListAttestations(ctx context.Context, runID string) ([]*Attestation, error)
}
