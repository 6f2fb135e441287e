package apitypes

// ManualRunRequest is the body of POST /api/v1/admin/runs: the source, the
// workflow (its `name`), the ref (branch, tag, full ref or commit SHA;
// default the repository's HEAD, or a GitHub repository's default branch),
// the repository ("owner/repo") of a forge source, and
// the dispatch inputs (JSON values, or strings to be typed by the
// workflow's declarations).
type ManualRunRequest struct {
	SourceID string         `json:"sourceId"`
	Workflow string         `json:"workflow"`
	Ref      string         `json:"ref,omitempty"`
	Repo     string         `json:"repo,omitempty"`
	Inputs   map[string]any `json:"inputs,omitempty"`
}
