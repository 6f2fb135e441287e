-- +goose Up
-- Provenance signing keys (KiCI orchestrator_signing_keys, migration 084) and
-- stored attestation bundles. The partial unique index is the database-level
-- guarantee that at most one key is active, even with several orchestrators
-- sharing this database.
CREATE TABLE orchestrator_signing_keys (
    kid                   TEXT PRIMARY KEY,
    public_jwk            {{.JSON}} NOT NULL,
    encrypted_private_jwk {{.Bytes}} NOT NULL,
    alg                   TEXT NOT NULL DEFAULT 'ES256',
    signer_kind           TEXT NOT NULL DEFAULT 'db',
    status                TEXT NOT NULL CHECK (status IN ('active', 'retiring', 'retired', 'revoked')),
    revocation_reason     TEXT NOT NULL DEFAULT '',
    created_at            {{.Time}} NOT NULL,
    activated_at          {{.Time}},
    retired_at            {{.Time}},
    revoked_at            {{.Time}}
);
CREATE UNIQUE INDEX orchestrator_signing_keys_one_active ON orchestrator_signing_keys (status) WHERE status = 'active';

CREATE TABLE provenance_attestations (
    id             TEXT PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES execution_runs (id) ON DELETE CASCADE,
    job_id         TEXT NOT NULL,
    subject_name   TEXT NOT NULL,
    subject_digest TEXT NOT NULL,
    kid            TEXT NOT NULL,
    bundle         {{.JSON}} NOT NULL,
    created_at     {{.Time}} NOT NULL,
    UNIQUE (run_id, job_id, subject_digest)
);
CREATE INDEX provenance_attestations_run ON provenance_attestations (run_id, created_at);

-- +goose Down
DROP TABLE provenance_attestations;
DROP TABLE orchestrator_signing_keys;
