package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

const signingKeyCols = `kid, public_jwk, encrypted_private_jwk, alg, signer_kind, status, revocation_reason, created_at, activated_at, retired_at, revoked_at`

func scanSigningKey(r scanner) (*store.SigningKey, error) {
	var k store.SigningKey
	var pub []byte
	if err := r.Scan(&k.Kid, &pub, &k.EncryptedPrivateJWK, &k.Alg, &k.SignerKind, &k.Status, &k.RevocationReason,
		&k.CreatedAt, &k.ActivatedAt, &k.RetiredAt, &k.RevokedAt); err != nil {
		return nil, mapErr(err)
	}
	k.PublicJWK = pub
	k.CreatedAt = k.CreatedAt.UTC()
	k.ActivatedAt, k.RetiredAt, k.RevokedAt = utc(k.ActivatedAt), utc(k.RetiredAt), utc(k.RevokedAt)
	return &k, nil
}

func insertActiveKey(ctx context.Context, tx pgx.Tx, k *store.SigningKey) error {
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
	act := ts(k.CreatedAt)
	k.ActivatedAt = &act
	_, err := tx.Exec(ctx, `INSERT INTO orchestrator_signing_keys (`+signingKeyCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,NULL,NULL)`,
		k.Kid, string(k.PublicJWK), k.EncryptedPrivateJWK, k.Alg, k.SignerKind, k.Status, "", ts(k.CreatedAt), act)
	return err
}

// CreateActiveSigningKey inserts k as the active key; ErrConflict when one
// is already active (partial unique index) or the kid exists.
func (s *Store) CreateActiveSigningKey(ctx context.Context, k *store.SigningKey) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return insertActiveKey(ctx, tx, k) }))
}

// RotateSigningKey demotes retiring→retired and active→retiring, then
// inserts k as active, in one transaction. A concurrent rotation makes the
// insert violate the one-active index: ErrConflict.
func (s *Store) RotateSigningKey(ctx context.Context, k *store.SigningKey) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := now()
		if _, err := tx.Exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'retired', retired_at = $1 WHERE status = 'retiring'`, t); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'retiring' WHERE status = 'active'`); err != nil {
			return err
		}
		return insertActiveKey(ctx, tx, k)
	}))
}

// GetSigningKey returns a key by kid, or ErrNotFound.
func (s *Store) GetSigningKey(ctx context.Context, kid string) (*store.SigningKey, error) {
	return scanSigningKey(s.pool.QueryRow(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE kid = $1`, kid))
}

// GetActiveSigningKey returns the active key, or ErrNotFound.
func (s *Store) GetActiveSigningKey(ctx context.Context) (*store.SigningKey, error) {
	return scanSigningKey(s.pool.QueryRow(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE status = 'active'`))
}

// ListSigningKeys returns every key, newest first.
func (s *Store) ListSigningKeys(ctx context.Context) ([]*store.SigningKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys ORDER BY created_at DESC, kid`)
	return collect(rows, err, scanSigningKey)
}

// RevokeSigningKey revokes kid; false when it was already revoked.
func (s *Store) RevokeSigningKey(ctx context.Context, kid, reason string, at time.Time) (bool, error) {
	ok, err := changed(s.pool.Exec(ctx, `UPDATE orchestrator_signing_keys SET status = 'revoked', revocation_reason = $1, revoked_at = $2 WHERE kid = $3 AND status <> 'revoked'`,
		reason, ts(at), kid))
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
	var bundle []byte
	if err := r.Scan(&a.ID, &a.RunID, &a.JobID, &a.SubjectName, &a.SubjectDigest, &a.Kid, &bundle, &a.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	a.Bundle = bundle
	a.CreatedAt = a.CreatedAt.UTC()
	return &a, nil
}

// PutAttestation stores (or replaces, per run/job/digest) a bundle.
func (s *Store) PutAttestation(ctx context.Context, a *store.Attestation) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO provenance_attestations (`+attestationCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
		ON CONFLICT (run_id, job_id, subject_digest) DO UPDATE SET id = excluded.id, subject_name = excluded.subject_name,
		kid = excluded.kid, bundle = excluded.bundle, created_at = excluded.created_at`,
		a.ID, a.RunID, a.JobID, a.SubjectName, a.SubjectDigest, a.Kid, string(a.Bundle), ts(a.CreatedAt))
	return mapErr(err)
}

// GetAttestation returns a bundle by id, or ErrNotFound.
func (s *Store) GetAttestation(ctx context.Context, id string) (*store.Attestation, error) {
	return scanAttestation(s.pool.QueryRow(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE id = $1`, id))
}

// ListAttestations returns a run's bundles, oldest first.
func (s *Store) ListAttestations(ctx context.Context, runID string) ([]*store.Attestation, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE run_id = $1 ORDER BY created_at, id`, runID)
	return collect(rows, err, scanAttestation)
}
