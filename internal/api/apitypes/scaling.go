package apitypes

import "time"

// ScalersView is the body of GET /scalers: what the agent scalers are
// doing (scaler.Status on the server). Counts are agents.
type ScalersView struct {
	// GlobalMaxAgents caps the agents of every scaler together
	// (scalers.yaml globalMaxAgents, default 50).
	GlobalMaxAgents int `json:"globalMaxAgents"`
	// Active counts the running agents of every scaler.
	Active int `json:"active"`
	// Reloads counts the scaler configuration reloads since the start.
	Reloads int `json:"reloads"`
	// Scalers lists each configured scaler (never null).
	Scalers []ScalerView `json:"scalers"`
}

// ScalerView is one scaler of ScalersView (scaler.ScalerStatus).
type ScalerView struct {
	Name string `json:"name"`
	// Type is the backend: docker, firecracker, …
	Type string `json:"type"`
	// Retiring is true for a scaler removed from the configuration that
	// still has agents.
	Retiring bool `json:"retiring"`
	// State is active, degraded (the backend cannot spawn now) or
	// retiring; StateReason says why it is not active.
	State       string `json:"state"`
	StateReason string `json:"stateReason,omitempty"`
	// Accel is how a VM scaler's guests run, decided by a boot probe at
	// start (qemu scalers only, absent for other types): kvm, tcg (KVM
	// failed: software emulation, AccelNote says why), forced-tcg (the
	// configuration asks for tcg), probing (the probe runs) or none (no
	// boot succeeded: the scaler is degraded, StateReason says why).
	Accel string `json:"accel,omitempty"`
	// BootMs is the probe boot's duration in milliseconds, from the VMM's
	// start to the guest's init (absent until measured).
	BootMs int64 `json:"bootMs,omitempty"`
	// AccelNote says why KVM was not used (Accel tcg) or why no boot
	// succeeded (Accel none).
	AccelNote string `json:"accelNote,omitempty"`
	// MaxAgents and MaxConcurrentSpawns are the configured caps.
	MaxAgents           int `json:"maxAgents"`
	MaxConcurrentSpawns int `json:"maxConcurrentSpawns"`
	// LabelSets are the label sets the scaler spawns agents for (null when
	// none is configured).
	LabelSets [][]string `json:"labelSets" nullable:"true"`
	// Active, Spawning and Queued count the scaler's agents by state.
	Active   int `json:"active"`
	Spawning int `json:"spawning"`
	Queued   int `json:"queued"`
	// SpawnedTotal, FailedTotal and RefusedTotal count spawns since the
	// start: succeeded, failed, and refused by a cap.
	SpawnedTotal int64 `json:"spawnedTotal"`
	FailedTotal  int64 `json:"spawnFailuresTotal"`
	RefusedTotal int64 `json:"spawnRefusalsTotal"`
	// Agents lists the scaler's agents by id (never null).
	Agents []ScalerAgentView `json:"agents"`
}

// ScalerAgentView is one agent of a scaler (scaler.AgentStatus): State is
// queued (waiting for a spawn slot), spawning or running; JobID is the job
// it runs ("" while idle; several joined with ","), RunID that job's run,
// Warm true for a pool agent not yet given a job.
type ScalerAgentView struct {
	AgentID   string    `json:"agentId"`
	JobID     string    `json:"jobId"`
	RunID     string    `json:"runId,omitempty"`
	State     string    `json:"state"`
	Warm      bool      `json:"warm"`
	CreatedAt time.Time `json:"createdAt"`
}
