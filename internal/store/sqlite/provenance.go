package sqlite

import (
	"context"
	"database/sql"
	"time"

	"kici.dev/kici/internal/store"
)

const signingKeyCols = `kid, public_jwk, encrypted_private_jwk, alg, signer_kind, status, revocation_reason, created_at, activated_at, retired_at, revoked_at`

func scanSigningKey(r scanner) (*store.SigningKey, error) {
	var k store.SigningKey
	var pub string
	var created int64
	var activated, retired, revoked sql.NullInt64
	if err := r.Scan(&k.Kid, &pub, &k.EncryptedPrivateJWK, &k.Alg, &k.SignerKind, &k.Status, &k.RevocationReason,
		&created, &activated, &retired, &revoked); err != nil {
		return nil, mapErr(err)
	}
	k.PublicJWK = []byte(pub)
	k.CreatedAt = time.UnixMilli(created).UTC()
	k.ActivatedAt, k.RetiredAt, k.RevokedAt = fromMs(activated), fromMs(retired), fromMs(revoked)
	return &k, nil
}

func insertActiveKey(ctx context.Context, q queryer, k *store.SigningKey) error {
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
	_, err := q.ExecContext(ctx, `INSERT INTO orchestrator_signing_keys (`+signingKeyCols+`) VALUES (?,?,?,?,?,?,?,?,?,NULL,NULL)`,
		k.Kid, string(k.PublicJWK), k.EncryptedPrivateJWK, k.Alg, k.SignerKind, k.Status, "", ms(k.CreatedAt), ms(act))
	return mapErr(err)
}

// CreateActiveSigningKey inserts k as the active key; ErrConflict when one
// is already active (partial unique index) or the kid exists.
func (s *Store) CreateActiveSigningKey(ctx context.Context, k *store.SigningKey) error {
	return insertActiveKey(ctx, s.db, k)
}

// RotateSigningKey demotes retiring→retired and active→retiring, then
// inserts k as active, in one transaction.
func (s *Store) RotateSigningKey(ctx context.Context, k *store.SigningKey) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		t := ms(now())
		if _, err := tx.ExecContext(ctx, `UPDATE orchestrator_signing_keys SET status = 'retired', retired_at = ? WHERE status = 'retiring'`, t); err != nil {
			return mapErr(err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE orchestrator_signing_keys SET status = 'retiring' WHERE status = 'active'`); err != nil {
			return mapErr(err)
		}
		return insertActiveKey(ctx, tx, k)
	})
}

// GetSigningKey returns a key by kid, or ErrNotFound.
func (s *Store) GetSigningKey(ctx context.Context, kid string) (*store.SigningKey, error) {
	return scanSigningKey(s.db.QueryRowContext(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE kid = ?`, kid))
}

// GetActiveSigningKey returns the active key, or ErrNotFound.
func (s *Store) GetActiveSigningKey(ctx context.Context) (*store.SigningKey, error) {
	return scanSigningKey(s.db.QueryRowContext(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys WHERE status = 'active'`))
}

// ListSigningKeys returns every key, newest first.
func (s *Store) ListSigningKeys(ctx context.Context) ([]*store.SigningKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+signingKeyCols+` FROM orchestrator_signing_keys ORDER BY created_at DESC, kid`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSigningKey)
}

// RevokeSigningKey revokes kid; false when it was already revoked.
func (s *Store) RevokeSigningKey(ctx context.Context, kid, reason string, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE orchestrator_signing_keys SET status = 'revoked', revocation_reason = ?, revoked_at = ? WHERE kid = ? AND status <> 'revoked'`,
		reason, ms(at), kid)
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
	var created int64
	if err := r.Scan(&a.ID, &a.RunID, &a.JobID, &a.SubjectName, &a.SubjectDigest, &a.Kid, &bundle, &created); err != nil {
		return nil, mapErr(err)
	}
	a.Bundle = []byte(bundle)
	a.CreatedAt = time.UnixMilli(created).UTC()
	return &a, nil
}

// PutAttestation stores (or replaces, per run/job/digest) a bundle.
func (s *Store) PutAttestation(ctx context.Context, a *store.Attestation) error {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO provenance_attestations (`+attestationCols+`) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT (run_id, job_id, subject_digest) DO UPDATE SET id = excluded.id, subject_name = excluded.subject_name,
		kid = excluded.kid, bundle = excluded.bundle, created_at = excluded.created_at`,
		a.ID, a.RunID, a.JobID, a.SubjectName, a.SubjectDigest, a.Kid, string(a.Bundle), ms(a.CreatedAt))
	return mapErr(err)
}

// GetAttestation returns a bundle by id, or ErrNotFound.
func (s *Store) GetAttestation(ctx context.Context, id string) (*store.Attestation, error) {
	return scanAttestation(s.db.QueryRowContext(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE id = ?`, id))
}

// ListAttestations returns a run's bundles, oldest first.
func (s *Store) ListAttestations(ctx context.Context, runID string) ([]*store.Attestation, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+attestationCols+` FROM provenance_attestations WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAttestation)
}
