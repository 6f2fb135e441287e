package scaler

import (
	"sort"
	"strings"
	"time"
)

// ScalerStatus is one scaler in the admin view (GET /api/v1/admin/scalers).
type ScalerStatus struct {
	Name        string      `json:"name"`
	Type        BackendType `json:"type"`
	Retiring    bool        `json:"retiring"`
	State       State       `json:"state"` // ScalerActive, ScalerDegraded or ScalerRetiring
	StateReason string      `json:"stateReason,omitempty"`
	// Accel is how a VM scaler's guests run (qemu scalers; empty for
	// other types): AccelUsingKVM, AccelUsingTCG (KVM was tried and failed),
	// AccelForcedTCG (accel: tcg in the configuration), AccelProbing
	// while the start-up boot probe runs, AccelNone when no probe boot
	// succeeded (the scaler is then degraded with the reason).
	Accel AccelState `json:"accel,omitempty"`
	// BootMs is the probe boot's duration in milliseconds, from QEMU's
	// start to the guest's init (0 until measured).
	BootMs int64 `json:"bootMs,omitempty"`
	// AccelNote says why KVM was not used when Accel is AccelUsingTCG.
	AccelNote           string        `json:"accelNote,omitempty"`
	MaxAgents           int           `json:"maxAgents"`
	MaxConcurrentSpawns int           `json:"maxConcurrentSpawns"`
	LabelSets           [][]string    `json:"labelSets"`
	Active              int           `json:"active"`
	Spawning            int           `json:"spawning"`
	Queued              int           `json:"queued"`
	SpawnedTotal        int64         `json:"spawnedTotal"`
	FailedTotal         int64         `json:"spawnFailuresTotal"`
	RefusedTotal        int64         `json:"spawnRefusalsTotal"`
	Agents              []AgentStatus `json:"agents"`
}

// AgentStatus is one agent of a scaler.
type AgentStatus struct {
	AgentID   string     `json:"agentId"`
	JobID     string     `json:"jobId"`
	RunID     string     `json:"runId,omitempty"`
	State     AgentState `json:"state"`
	Warm      bool       `json:"warm"`
	CreatedAt time.Time  `json:"createdAt"`
}

// Status is the admin view of the scalers.
type Status struct {
	GlobalMaxAgents int            `json:"globalMaxAgents"`
	Active          int            `json:"active"`
	Reloads         int            `json:"reloads"`
	Scalers         []ScalerStatus `json:"scalers"`
}

// Status returns what each scaler is doing. An agent's JobID is the job it
// was spawned for or, for a warm pool agent spawned without one and handed
// a job later through ordinary dispatch (which the Manager does not
// track), the jobs the registry says it runs, comma-separated.
func (m *Manager) Status() Status {
	running := m.agentJobs() // before m.mu: the registry has its own locks
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{GlobalMaxAgents: m.cfg.GlobalMaxAgents, Reloads: m.reloads, Scalers: []ScalerStatus{}}
	byScaler := map[*scalerState][]AgentStatus{}
	for _, a := range m.agents {
		job := a.jobID
		if job == "" {
			job = strings.Join(running[a.id], ",")
		}
		byScaler[a.sc] = append(byScaler[a.sc], AgentStatus{AgentID: a.id, JobID: job, RunID: a.runID, State: a.state, Warm: a.warm, CreatedAt: a.createdAt.UTC()})
	}
	for _, sc := range m.scalers {
		s := ScalerStatus{Name: sc.entry.Name, Type: sc.entry.Type, Retiring: sc.retiring, MaxAgents: sc.entry.MaxAgents,
			MaxConcurrentSpawns: sc.entry.MaxConcurrentSpawns, Active: sc.active, Spawning: sc.spawning,
			SpawnedTotal: sc.spawned, FailedTotal: sc.failed, RefusedTotal: sc.refused, Agents: byScaler[sc]}
		s.State, s.StateReason = stateOf(sc)
		if vr, ok := sc.backend.(vmReporter); ok {
			a := vr.AccelStatus()
			s.Accel, s.BootMs, s.AccelNote = a.Accel, a.BootTime.Milliseconds(), a.Note
		}
		if s.Agents == nil {
			s.Agents = []AgentStatus{}
		}
		sort.Slice(s.Agents, func(i, j int) bool { return s.Agents[i].AgentID < s.Agents[j].AgentID })
		for _, a := range s.Agents {
			if a.State == AgentQueued {
				s.Queued++
			}
		}
		for _, ls := range sc.entry.LabelSets {
			s.LabelSets = append(s.LabelSets, append([]string(nil), ls.Labels...))
		}
		st.Active += sc.active
		st.Scalers = append(st.Scalers, s)
	}
	return st
}

// AccelState is how a VM scaler's guests run, as ScalerStatus.Accel
// reports it: one of the AccelUsing*, AccelForcedTCG, AccelProbing and
// AccelNone constants (kici's qemu backend, docs/scaling.md).
type AccelState string

// Accelerations a VM scaler reports in ScalerStatus.Accel.
const (
	// AccelUsingKVM: the guests use KVM (the probe boot with KVM succeeded).
	AccelUsingKVM AccelState = "kvm"
	// AccelUsingTCG: software emulation because KVM was tried and failed
	// (AccelNote says why).
	AccelUsingTCG AccelState = "tcg"
	// AccelForcedTCG: software emulation because the configuration says
	// accel: tcg (no KVM probe ran).
	AccelForcedTCG AccelState = "forced-tcg"
	// AccelProbing: the start-up boot probe has not ended yet.
	AccelProbing AccelState = "probing"
	// AccelNone: no probe boot succeeded; the scaler is degraded.
	AccelNone AccelState = "none"
)

// AccelStatus is how a VM backend's guests run, for Status.
type AccelStatus struct {
	// Accel is one of AccelUsingKVM, AccelUsingTCG, AccelForcedTCG,
	// AccelProbing, AccelNone.
	Accel AccelState
	// BootTime is the probe boot's duration (0 until measured or when it
	// failed).
	BootTime time.Duration
	// Note says why KVM was not used (AccelUsingTCG) or why no boot succeeded
	// (AccelNone).
	Note string
}

// vmReporter is a backend whose guests' acceleration is decided at start
// (QEMU.AccelStatus).
type vmReporter interface{ AccelStatus() AccelStatus }
