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
func setupSecrets(ctx context.Context, cfg *config.Config, st store.Store, logger *slog.Logger) (*secrets.Service, error) {
	ring, err := masterkey.LoadRing(cfg.DataDir, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
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
	return svc, nil
}
