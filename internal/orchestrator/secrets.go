package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/secrets"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// setupSecrets loads the master key ring (KICI_SECRET_KEY / _FILE or the
// generated <data dir>/secret.key, plus KICI_SECRET_KEY_OLD / _FILE_OLD
// during a rotation) and checks that every stored sealed value opens with
// it. A key that does not open the stored data is refused: the
// orchestrator does not start rather than serve garbage. With an old key
// set, every sealed value is re-encrypted with the current key at once (the
// same work as POST /api/v1/admin/rotate-key), so that readers holding only
// the current key, such as the provenance signer, keep working.
//
// Then every webhook secret of the sources is sealed with the current key
// (rows from before encryption at rest were plaintext; rows sealed with
// the old key are re-sealed), once the key is known to be the right one.
// raw is the store without SealSources' view.
func setupSecrets(ctx context.Context, ring *masterkey.Ring, st, raw store.Store, logger *slog.Logger) (*secrets.Service, error) {
	svc := secrets.New(st, ring)
	if err := svc.VerifyKey(ctx); err != nil {
		return nil, fmt.Errorf("refusing to start: %w", err)
	}
	if ring.Old != nil {
		// Re-encrypt now, before anything (e.g. the provenance signer)
		// reads sealed values with the current key alone.
		counts, err := svc.Rotate(ctx, &store.AccessLogEntry{Action: "key.rotate", Resource: "master_key", Detail: "at start (KICI_SECRET_KEY_OLD set)"})
		if err != nil {
			return nil, fmt.Errorf("refusing to start: re-encrypting with the new master key: %w", err)
		}
		logger.Warn("KICI_SECRET_KEY_OLD is set: every sealed value was re-encrypted with KICI_SECRET_KEY; unset KICI_SECRET_KEY_OLD",
			"secrets", counts["reEncrypted"], "signingKeys", counts["reEncryptedSigningKeys"])
	}
	n, err := secrets.SealStoredSourceSecrets(ctx, raw, ring)
	if err != nil {
		return nil, fmt.Errorf("refusing to start: sealing the sources' webhook secrets: %w", err)
	}
	if n > 0 {
		logger.Info("webhook secrets encrypted at rest with the master key", "rewritten", n)
	}
	return svc, nil
}

// loadRing loads the master key ring (KICI_SECRET_KEY / _FILE or the
// generated <data dir>/secret.key, plus KICI_SECRET_KEY_OLD / _FILE_OLD).
func loadRing(cfg *config.Config) (*masterkey.Ring, error) {
	ring, err := masterkey.LoadRing(cfg.DataDir, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return ring, nil
}
