package scaler

import (
	"sort"
	"time"
)

// ScalerStatus is one scaler in the admin view (GET /api/v1/admin/scalers).
type ScalerStatus struct {
	Name                string        `json:"name"`
	Type                string        `json:"type"`
	Retiring            bool          `json:"retiring"`
	State               string        `json:"state"` // ScalerActive, ScalerDegraded or ScalerRetiring
	StateReason         string        `json:"stateReason,omitempty"`
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
	AgentID   string    `json:"agentId"`
	JobID     string    `json:"jobId"`
	RunID     string    `json:"runId,omitempty"`
	State     string    `json:"state"`
	Warm      bool      `json:"warm"`
	CreatedAt time.Time `json:"createdAt"`
}

// Status is the admin view of the scalers.
type Status struct {
	GlobalMaxAgents int            `json:"globalMaxAgents"`
	Active          int            `json:"active"`
	Reloads         int            `json:"reloads"`
	Scalers         []ScalerStatus `json:"scalers"`
}

// Status returns what each scaler is doing.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{GlobalMaxAgents: m.cfg.GlobalMaxAgents, Reloads: m.reloads, Scalers: []ScalerStatus{}}
	byScaler := map[*scalerState][]AgentStatus{}
	for _, a := range m.agents {
		byScaler[a.sc] = append(byScaler[a.sc], AgentStatus{AgentID: a.id, JobID: a.jobID, RunID: a.runID, State: a.state, Warm: a.warm, CreatedAt: a.createdAt.UTC()})
	}
	for _, sc := range m.scalers {
		s := ScalerStatus{Name: sc.entry.Name, Type: sc.entry.Type, Retiring: sc.retiring, MaxAgents: sc.entry.MaxAgents,
			MaxConcurrentSpawns: sc.entry.MaxConcurrentSpawns, Active: sc.active, Spawning: sc.spawning,
			SpawnedTotal: sc.spawned, FailedTotal: sc.failed, RefusedTotal: sc.refused, Agents: byScaler[sc]}
		s.State, s.StateReason = stateOf(sc)
		if s.Agents == nil {
			s.Agents = []AgentStatus{}
		}
		sort.Slice(s.Agents, func(i, j int) bool { return s.Agents[i].AgentID < s.Agents[j].AgentID })
		for _, a := range s.Agents {
			if a.State == stateQueued {
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
