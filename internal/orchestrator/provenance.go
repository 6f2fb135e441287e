package orchestrator

import (
	"context"
	"errors"
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

// setupProvenance builds the provenance service. With
// KICI_ORCHESTRATOR_PROVENANCE_ISSUER set it loads the master key, makes
// sure a signing key exists (the first orchestrator to get there creates it;
// the store's one-active-key guard makes any other use that one) and
// returns the attester with which the dispatcher accepts
// provenance.attest. Without it the service only publishes keys already
// stored, and the attester is nil.
func setupProvenance(ctx context.Context, cfg *config.Config, st store.Store, logger *slog.Logger) (*provenance.Service, dispatch.Attester, error) {
	id, err := os.Hostname()
	if err != nil || id == "" {
		id = "default"
	}
	if cfg.ProvenanceIssuer == "" {
		return provenance.NewService(st, provenance.NewKeys(st, nil), provenance.Config{OrchestratorID: id, Version: Version}), nil, nil
	}
	mk, err := masterkey.Load(cfg.DataDir, os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("provenance signing: %w", err)
	}
	keys := provenance.NewKeys(st, mk)
	svc := provenance.NewService(st, keys, provenance.Config{Issuer: cfg.ProvenanceIssuer, OrchestratorID: id, Version: Version})
	kid, _, err := keys.Active(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("provenance signing key: %w", err)
	}
	logger.Info("provenance signing enabled", "issuer", cfg.ProvenanceIssuer, "kid", kid, "masterKey", mk.Source())
	return svc, attester{svc}, nil
}

// attester adapts provenance.Service to dispatch.Attester.
type attester struct{ svc *provenance.Service }

// Attest implements dispatch.Attester: only sha256 digests are accepted.
func (a attester) Attest(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	in := make([]provenance.SubjectInput, 0, len(subjects))
	for _, s := range subjects {
		if len(s.Digest) != 1 || s.Digest["sha256"] == "" {
			return nil, errors.New("each subject needs exactly one digest, sha256")
		}
		in = append(in, provenance.SubjectInput{Name: s.Name, SHA256: s.Digest["sha256"]})
	}
	atts, err := a.svc.Attest(ctx, runID, jobID, in)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.AttestationRef, 0, len(atts))
	for _, x := range atts {
		out = append(out, protocol.AttestationRef{ID: x.ID, SubjectName: x.SubjectName, SubjectDigest: x.SubjectDigest})
	}
	return out, nil
}
