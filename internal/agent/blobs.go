package agent

import (
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/agent/transfer"
)

// blobOptions points the runner's cache and artifact transfers at the
// orchestrator this agent connects to: its HTTP base is the WebSocket URL's
// host, so an agent that can reach /ws reaches the blob routes too.
func blobOptions(cfg *Config) runner.BlobOptions {
	base, err := transfer.BaseURLFromWS(cfg.OrchestratorURL)
	if err != nil {
		base = ""
	}
	return runner.BlobOptions{BaseURL: base, JobHome: cfg.JobHome}
}
