package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// setupProvenance builds the provenance service. The issuer is
// KICI_ORCHESTRATOR_PROVENANCE_ISSUER, else, on the embedded default (SQLite
// in the data directory, one node), ownURL: the orchestrator's own base
// URL, so that `attest:` works out of the box. With an issuer it loads the
// master key, makes sure a signing key exists (the first orchestrator to
// get there creates it; the store's one-active-key guard makes any other
// use that one) and returns the attester with which the dispatcher accepts
// provenance.attest. Without one (PostgreSQL and no issuer: the nodes of a
// cluster must agree on a public name, which only the operator knows) the
// service only publishes keys already stored, and the attester is nil.
func setupProvenance(ctx context.Context, cfg *config.Config, st store.Store, ownURL string, logger *slog.Logger) (*provenance.Service, dispatch.Attester, error) {
	id, err := os.Hostname()
	if err != nil || id == "" {
		id = "default"
	}
	issuer := embeddedIssuer(cfg, ownURL)
	if issuer == "" {
		return provenance.NewService(st, provenance.NewKeys(st, nil), provenance.Config{OrchestratorID: id, Version: Version}), nil, nil
	}
	mk, err := masterkey.Load(cfg.DataDir, os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("provenance signing: %w", err)
	}
	keys := provenance.NewKeys(st, mk)
	svc := provenance.NewService(st, keys, provenance.Config{Issuer: issuer, OrchestratorID: id, Version: Version})
	kid, _, err := keys.Active(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("provenance signing key: %w", err)
	}
	logger.Info("provenance signing enabled", "issuer", issuer, "configured", cfg.ProvenanceIssuer != "", "kid", kid, "masterKey", mk.Source())
	return svc, attester{svc}, nil
}

// embeddedIssuer is the provenance issuer: KICI_ORCHESTRATOR_PROVENANCE_ISSUER
// when set; else ownURL (http://127.0.0.1:4000 by default) on the embedded
// SQLite default, whose one node is the only signer of its database; else ""
// (signing off). The issuer is only a name verifiers pin (they fetch the
// keys from <issuer>/.well-known/jwks.json), so the orchestrator's own URL
// is the natural one; a deployment reached under another name sets the
// variable.
func embeddedIssuer(cfg *config.Config, ownURL string) string {
	switch {
	case cfg.ProvenanceIssuer != "":
		return cfg.ProvenanceIssuer
	case cfg.DatabaseURL == "":
		return ownURL
	default:
		return ""
	}
}

// attester adapts provenance.Service to dispatch.Attester.
type attester struct{ svc *provenance.Service }

// Attest implements dispatch.Attester (provenance.Service.AttestRefs).
func (a attester) Attest(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	return a.svc.AttestRefs(ctx, runID, jobID, subjects)
}
