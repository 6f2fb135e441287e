package scaler

// Registry is the view of connected agents the Manager needs from the
// dispatcher, which is built after it (the dispatcher spawns through the
// Manager): which registered agents are idle, and where an agent's end is
// reported. The scaler owns the interface so that it never imports
// dispatch; dispatch.Dispatcher implements it.
type Registry interface {
	// IdleAgents maps each connected agent id to whether it runs no job.
	IdleAgents() map[string]bool
	// AgentExited is told that an agent the Manager started has ended or
	// its spawn failed (err says why).
	AgentExited(agentID string, err error)
	// AgentJobs maps each connected agent id to the unfinished jobs it
	// owns (sorted; none for an idle agent).
	AgentJobs() map[string][]string
}

// Serve connects the Manager to the agent registry once it exists and runs
// a warm-pool pass: warm pools wait until then. The server calls it once,
// while it is wired, before any agent is spawned.
func (m *Manager) Serve(r Registry) {
	m.mu.Lock()
	m.opts.IdleAgents, m.opts.Exited, m.opts.AgentJobs = r.IdleAgents, r.AgentExited, r.AgentJobs
	if p, ok := r.(PendingReasons); ok {
		m.opts.PendingReason = p.SetPendingReason
	}
	m.mu.Unlock()
	m.kickWarm()
}

// idleAgents returns Options.IdleAgents as last set (Serve).
func (m *Manager) idleAgents() func() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts.IdleAgents
}

// agentJobs returns the registry's agent → jobs map, or nil before Serve.
func (m *Manager) agentJobs() map[string][]string {
	m.mu.Lock()
	f := m.opts.AgentJobs
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// PendingReasons is implemented by a Registry that can show why a spawn
// for a job waits (dispatch.Dispatcher): Serve points
// Options.PendingReason at it.
type PendingReasons interface {
	// SetPendingReason records reason as job jobID's pending reason while
	// the job is still queued; otherwise it does nothing.
	SetPendingReason(jobID, reason string)
}
