// Package spawn holds what dispatch and the scaler share about starting an
// agent for a job: the request and its two refusals. It sits below both,
// so that neither imports the other: dispatch asks through its Spawner
// interfaces, the scaler answers, and the server wires the two together.
package spawn

import "errors"

// Request describes a job an agent is to be started for (KiCI
// requestScale arguments).
type Request struct {
	// JobID and RunID identify the job the agent is bound to.
	JobID, RunID string
	// RunsOn and Exclude are the job's routing labels.
	RunsOn, Exclude []string
}

// ErrNoBackend is returned when no backend serves the job's labels (the
// job keeps its no-agent reason).
var ErrNoBackend = errors.New("no scaler serves these labels")

// ErrAtCapacity is wrapped by spawn errors when no further agent may be
// started (a global or per-scaler cap); the error text is then the job's
// pending reason, e.g. "scaler at capacity (4/4 agents)".
var ErrAtCapacity = errors.New("scaler at capacity")
