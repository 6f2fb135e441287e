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

// RunList is the body of GET /runs: one page of runs, newest first; Total
// counts every run the filter matches, Limit and Offset are the page
// actually served (Limit at most MaxRunLimit).
type RunList struct {
	Runs   []RunView `json:"runs"`
	Total  int       `json:"total"`
	Limit  int       `json:"limit"`
	Offset int       `json:"offset"`
}

// RunCount is the body of GET /runs?count=true: how many runs match, with
// the filter as applied. Since is normalised to UTC RFC 3339; Status is
// the de-duplicated comma-separated status list; each is null when not
// filtered on.
type RunCount struct {
	Total        int     `json:"total"`
	Since        *string `json:"since"`
	Status       *string `json:"status"`
	WorkflowName *string `json:"workflowName"`
	Repo         *string `json:"repo"`
}

// SigningKeyList is the body of GET /signing-keys: every provenance
// signing key, revoked ones included, newest first.
type SigningKeyList struct {
	Keys []SigningKey `json:"keys"`
}
