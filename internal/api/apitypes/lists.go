package apitypes

// Envelopes of the list and single-item answers: the JSON object the route
// returns around its items (lists are never null).

// RunEnvelope is the body of GET /runs/{runId} and POST /runs: {run}.
type RunEnvelope struct {
	Run RunView `json:"run"`
}

// JobList is the body of GET /runs/{runId}/jobs.
type JobList struct {
	Jobs []JobView `json:"jobs"`
}

// SourceEnvelope is the body of POST /generic-sources and GET
// /generic-sources/{id}: {source}.
type SourceEnvelope struct {
	Source SourceView `json:"source"`
}

// SourceList is the body of GET /generic-sources.
type SourceList struct {
	Sources []SourceView `json:"sources"`
}

// SecretList is the body of GET /generic-sources/{id}/webhook-secrets.
type SecretList struct {
	Secrets []SecretView `json:"secrets"`
}

// HeldRunList is the body of GET /held-runs.
type HeldRunList struct {
	HeldRuns []HeldRunView `json:"heldRuns"`
}

// CheckRunList is the body of GET /check-runs.
type CheckRunList struct {
	CheckRuns []CheckRunView `json:"checkRuns"`
}

// ArtifactList is the body of GET /runs/{runId}/artifacts.
type ArtifactList struct {
	Artifacts []ArtifactView `json:"artifacts"`
}

// AttestationList is the body of GET /runs/{runId}/attestations.
type AttestationList struct {
	Attestations []Attestation `json:"attestations"`
}

// AdminTokenList is the body of GET /tokens.
type AdminTokenList struct {
	Tokens []AdminTokenView `json:"tokens"`
}

// AgentTokenList is the body of GET /api/v1/agent-tokens.
type AgentTokenList struct {
	Tokens []AgentTokenView `json:"tokens"`
}
