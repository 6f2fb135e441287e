package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

const signingKeyCols = `kid, public_jwk, encrypted_private_jwk, alg, signer_kind, status, revocation_reason, created_at, activated_at, retired_at, revoked_at`

func scanSigningKey(r scanner) (*store.SigningKey, error) {
	var k store.SigningKey
	var pub string
	if err := r.Scan(&k.Kid, &pub, &k.EncryptedPrivateJWK, &k.Alg, &k.SignerKind, &k.Status, &k.RevocationReason,
		tcol(&k.CreatedAt), ntcol(&k.ActivatedAt), ntcol(&k.RetiredAt), ntcol(&k.RevokedAt)); err != nil {
		return nil, mapErr(err)
	}
	k.PublicJWK = []byte(pub)
	return &k, nil
}

func insertActiveKey(ctx context.Context, q conn, k *store.SigningKey) error {
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	if k.Alg == "" {
		k.Alg = "ES256"
	}
	if k.SignerKind == "" {
		k.SignerKind = "db"
	}
	k.Status = store.SigningKeyActive
	act := k.CreatedAt
	k.ActivatedAt = &act
	_, err := q.exec(ctx, `INSERT INTO orchestrator_signing_keys (`+signingKeyCols+`) VALUES (?,?::jsonb,?,?,?,?,?,?,?,NULL,NULL)`,
		k.Kid, string(k.PublicJWK), k.EncryptedPrivateJWK, k.Alg, k.SignerKind, k.Status, "", q.d.ts(k.CreatedAt), q.d.ts(act))
	return mapErr(err)
}

// CreateActiveSigningKey inserts k as the active key; ErrConflict when one
// is already active (partial unique index) or the kid exists.
func (s *Store) CreateActiveSigningKey(ctx context.Context, k *store.SigningKey) error {
	return insertActiveKey(ctx, s.conn, k)
}

// RotateSigningKey demotes retiring→retired and active→retiring, then
// inserts k as active, in one transaction. A concurrent rotation makes the
// insert violate the one-active index: ErrConflict.
func (s *Store) RotateSigningKey(ctx context.Context, k *store.SigningKey) error {
	return s.tx(ctx, func(tx conn) error {
		t := s.d.ts(now())
		if _, err := tx.exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'retired', retired_at = ? WHERE status = 'retiring'`, t); err != nil {
			return mapErr(err)
		}
		if _, err := tx.exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'retiring' WHERE status = 'active'`); err != nil {
			return mapErr(err)
		}
		return insertActiveKey(ctx, tx, k)
	})
}

// GetSigningKey returns a key by kid, or ErrNotFound.
func (s *Store) GetSigningKey(ctx context.Context, kid string) (*store.SigningKey, error) {
	return scanSigningKey(s.queryRow(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE kid = ?`, kid))
}

// GetActiveSigningKey returns the active key, or ErrNotFound.
func (s *Store) GetActiveSigningKey(ctx context.Context) (*store.SigningKey, error) {
	return scanSigningKey(s.queryRow(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE status = 'active'`))
}

// ListSigningKeys returns every key, newest first.
func (s *Store) ListSigningKeys(ctx context.Context) ([]*store.SigningKey, error) {
	rows, err := s.query(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys ORDER BY created_at DESC, kid`)
	return collect(rows, err, scanSigningKey)
}

// RevokeSigningKey revokes kid; false when it was already revoked.
func (s *Store) RevokeSigningKey(ctx context.Context, kid, reason string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'revoked', revocation_reason = ?, revoked_at = ? WHERE kid = ? AND status <> 'revoked'`,
		reason, s.d.ts(at), kid)
	ok, err := changed(res, err)
	if err != nil || ok {
		return ok, err
	}
	if _, err := s.GetSigningKey(ctx, kid); err != nil {
		return false, err
	}
	return false, nil
}

const attestationCols = `id, run_id, job_id, subject_name, subject_digest, kid, bundle, created_at`

func scanAttestation(r scanner) (*store.Attestation, error) {
	var a store.Attestation
	var bundle string
	if err := r.Scan(&a.ID, &a.RunID, &a.JobID, &a.SubjectName, &a.SubjectDigest, &a.Kid, &bundle, tcol(&a.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	a.Bundle = []byte(bundle)
	return &a, nil
}

// PutAttestation stores (or replaces, per run/job/digest) a bundle.
func (s *Store) PutAttestation(ctx context.Context, a *store.Attestation) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	_, err := s.exec(ctx, `INSERT INTO provenance_attestations (`+attestationCols+`) VALUES (?,?,?,?,?,?,?::jsonb,?)
		ON CONFLICT (run_id, job_id, subject_digest) DO UPDATE SET id = excluded.id, subject_name = excluded.subject_name,
		kid = excluded.kid, bundle = excluded.bundle, created_at = excluded.created_at`,
		a.ID, a.RunID, a.JobID, a.SubjectName, a.SubjectDigest, a.Kid, string(a.Bundle), s.d.ts(a.CreatedAt))
	return mapErr(err)
}

// GetAttestation returns a bundle by id, or ErrNotFound.
func (s *Store) GetAttestation(ctx context.Context, id string) (*store.Attestation, error) {
	return scanAttestation(s.queryRow(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE id = ?`, id))
}

// ListAttestations returns a run's bundles, oldest first.
func (s *Store) ListAttestations(ctx context.Context, runID string) ([]*store.Attestation, error) {
	rows, err := s.query(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE run_id = ? ORDER BY created_at, id`, runID)
	return collect(rows, err, scanAttestation)
}
