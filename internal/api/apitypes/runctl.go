package apitypes

// CancelRequest is the body of POST /runs/{runId}/cancel (optional).
type CancelRequest struct {
	// Force skips the grace period and the cleanup steps (SIGKILL at once).
	Force bool `json:"force"`
}

// CancelResponse answers POST /runs/{runId}/cancel (KiCI).
type CancelResponse struct {
	RunID string `json:"runId"`
	// Status is "cancelling" while agents have to confirm, else the final
	// run status.
	Status string `json:"status"`
	Force  bool   `json:"force"`
}

// DrainRequest is the body of POST /orchestrator/drain.
type DrainRequest struct {
	// Action is "drain" or "resume".
	Action string `json:"action"`
	// Node limits the action to one node of the cluster (its id); empty:
	// every node.
	Node string `json:"node,omitempty"`
}

// RerunResponse answers POST /runs/{runId}/rerun.
type RerunResponse struct {
	Run         RunView `json:"run"`
	ParentRunID string  `json:"parentRunId"`
}
