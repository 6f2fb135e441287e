package agent

import (
	"kici.dev/kici/internal/agent/runner"
	"kici.dev/kici/internal/agent/transfer"
)

// blobOptions points the runner's cache and artifact transfers at the
// orchestrator this agent connects to: its HTTP base is the WebSocket URL's
// host, so an agent that can reach /ws reaches the blob routes too.
//
// current is the WebSocket URL the agent is connected to now (one of a
// cluster's nodes); the job's transfers go to that node.
func blobOptions(cfg *Config, current func() string) runner.BlobOptions {
	return runner.BlobOptions{JobHome: cfg.JobHome, CurrentBaseURL: func() string {
		base, err := transfer.BaseURLFromWS(current())
		if err != nil {
			return ""
		}
		return base
	}}
}
