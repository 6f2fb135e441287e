package provenance

import (
	"context"
	"errors"

	"kici.dev/kici/internal/protocol"
)

// AttestRefs is Attest for a job's provenance.attest request: the wire
// subjects in, the stored attestations' refs out. Each subject needs
// exactly one digest, sha256 (the only one kici signs); errors are
// Attest's.
func (s *Service) AttestRefs(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	in := make([]SubjectInput, 0, len(subjects))
	for _, sub := range subjects {
		if len(sub.Digest) != 1 || sub.Digest["sha256"] == "" {
			return nil, errors.New("each subject needs exactly one digest, sha256")
		}
		in = append(in, SubjectInput{Name: sub.Name, SHA256: sub.Digest["sha256"]})
	}
	atts, err := s.Attest(ctx, runID, jobID, in)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.AttestationRef, 0, len(atts))
	for _, a := range atts {
		out = append(out, protocol.AttestationRef{ID: a.ID, SubjectName: a.SubjectName, SubjectDigest: a.SubjectDigest})
	}
	return out, nil
}
