package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/lockfile"
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

// secretResolver resolves the secrets a job's lock entry declares, in the
// run's org. Unknown references are left out (the agent fails the steps
// needing them); other errors make the dispatch retry.
func secretResolver(svc *secrets.Service) func(ctx context.Context, run *store.Run, job *store.Job) (map[string]string, error) {
	return func(ctx context.Context, run *store.Run, job *store.Job) (map[string]string, error) {
		var lj lockfile.Job
		if len(job.Config) == 0 {
			return nil, nil
		}
		if err := json.Unmarshal(job.Config, &lj); err != nil {
			return nil, fmt.Errorf("job config: %w", err)
		}
		refs := map[string]bool{}
		for _, ref := range lj.Secrets {
			refs[ref] = true
		}
		for _, s := range lj.Steps {
			for _, ref := range s.Secrets {
				refs[ref] = true
			}
		}
		if len(refs) == 0 {
			return nil, nil
		}
		out := map[string]string{}
		for ref := range refs {
			scope, key, err := secrets.ParseRef(ref)
			if err != nil {
				continue // the agent reports the unresolved reference
			}
			v, err := svc.Resolve(ctx, run.OrgID, scope, key, "job:"+job.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[ref] = v
		}
		return out, nil
	}
}
