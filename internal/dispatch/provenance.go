package dispatch

import (
	"context"

	"kici.dev/kici/internal/protocol"
)

// Attester signs provenance for a running job (implemented in the
// orchestrator over provenance.Service). It receives only the subjects the
// agent reported; run and job identity come from the dispatcher's records.
type Attester interface {
	// Attest signs and stores one bundle per subject and returns their refs.
	Attest(ctx context.Context, runID, jobID string, subjects []protocol.AttestSubject) ([]protocol.AttestationRef, error)
}

// attest handles provenance.attest. The job must be one this socket's agent
// currently runs: the dispatcher's ownership rule (owns) must hold, and in
// addition the job must be tracked live for this agent (not finished, not
// merely vouched for by the store) and the request's runId must be the
// job's. A request for a job the agent does not own counts as an ownership
// violation. It always answers with provenance.attest.result and never
// closes the connection except through the violation limit.
func (fr *frameHandler) attest(ctx context.Context, c *agentConn, m *protocol.ProvenanceAttest) bool {
	reply := &protocol.ProvenanceAttestResult{Type: protocol.TypeProvenanceAttestResult, RequestID: m.RequestID, JobID: m.JobID}
	refuse := func(why string) bool {
		reply.Error = why
		_ = c.send(reply)
		return true
	}
	if m.JobID == "" {
		return refuse("provenance.attest has no jobId")
	}
	js, owned := fr.reg.owns(ctx, c, m.JobID)
	if !owned {
		_ = c.send(&protocol.ProvenanceAttestResult{Type: protocol.TypeProvenanceAttestResult, RequestID: m.RequestID, JobID: m.JobID,
			Error: "job is not owned by this agent"})
		return fr.reg.violation(c, m.JobID)
	}
	live, runID := fr.reg.runsLive(c, js)
	a := fr.attester
	switch {
	case !live:
		return refuse("job is not running on this agent")
	case m.RunID != runID:
		return refuse("runId does not match the job")
	case a == nil:
		return refuse("provenance signing is not configured on the orchestrator (on PostgreSQL, set KICI_ORCHESTRATOR_PROVENANCE_ISSUER to its public URL)")
	}
	refs, err := a.Attest(ctx, runID, m.JobID, m.Subjects)
	if err != nil {
		fr.log.Warn("attestation refused", "agent", c.id, "job", m.JobID, "err", err)
		return refuse(err.Error())
	}
	fr.log.Info("attestation signed", "agent", c.id, "job", m.JobID, "subjects", len(refs))
	reply.OK = true
	reply.Attestations = refs
	_ = c.send(reply)
	return true
}
