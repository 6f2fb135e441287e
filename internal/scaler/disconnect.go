package scaler

import (
	"context"
	"time"
)

// vmBackend is a backend whose agents run inside a machine of their own
// (QEMU, Firecracker): the machine normally ends when its agent does (the
// guest powers off), but a guest that fails to (seen under software
// emulation: a restart that boots the guest again instead of ending QEMU)
// would otherwise hold its slot, memory and CPU until the orchestrator
// stops.
type vmBackend interface{ endsWithAgent() }

func (*QEMU) endsWithAgent()        {}
func (*Firecracker) endsWithAgent() {}

// SandboxPerAgent is implemented by backends of other packages whose
// agents run in a sandbox of their own that must end with the agent (the
// kubernetes backend's pods): AgentDisconnected treats them as VMs.
type SandboxPerAgent interface {
	// SandboxEndsWithAgent marks the backend; it does nothing.
	SandboxEndsWithAgent()
}

// ReasonedDestroyer is implemented by backends that record why an agent is
// destroyed (on the job's log and the agent's exit error).
type ReasonedDestroyer interface {
	// DestroyFor destroys agent id like Backend.Destroy, giving reason.
	DestroyFor(ctx context.Context, id, reason string) error
}

// AgentDisconnected hears that agentID's connection ended
// (dispatch.Spawner). A scaler-managed agent never comes back
// (its token dies with the socket), so when it runs in a VM that is still
// there Options.DisconnectGrace later, the VM is destroyed: one job per
// VM holds even when the guest does not power off. Agents of other
// backends end with their process; unknown ids are ignored.
func (m *Manager) AgentDisconnected(agentID string) {
	m.mu.Lock()
	rec := m.agents[agentID]
	m.mu.Unlock()
	if rec == nil {
		return
	}
	_, vm := rec.sc.backend.(vmBackend)
	_, sandbox := rec.sc.backend.(SandboxPerAgent)
	if !vm && !sandbox {
		return
	}
	go func() {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(m.opts.DisconnectGrace):
		}
		m.mu.Lock()
		still := m.agents[agentID] == rec && rec.state == AgentRunning
		m.mu.Unlock()
		if still {
			m.log.Warn("the VM of a disconnected agent did not end on its own; destroying it", "scaler", rec.sc.entry.Name,
				"agent", agentID, "grace", m.opts.DisconnectGrace)
			m.stopFor(agentID, "agent lost: its connection ended and its sandbox did not end within "+m.opts.DisconnectGrace.String())
		}
	}()
}
