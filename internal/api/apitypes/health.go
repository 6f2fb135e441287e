package apitypes

// Health is the body of GET /health (liveness): Status is always "ok",
// Version the orchestrator's build version.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Readiness is the body of GET /ready when the orchestrator is ready:
// Status "ready". Not ready is HTTP 503 {"status": "not_ready", "error":
// "Not ready: <cause>"}.
type Readiness struct {
	Status string `json:"status"`
}
