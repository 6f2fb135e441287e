package scaler

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"time"
)

// Handing spawned agents over. When a node of a cluster stops (SIGTERM)
// and its drain grace ends with jobs still running on agents it spawned,
// those agents need not die with it: each was given every live node's URL
// (agentURL, refreshAgentURLs), so once the node closes their sockets they
// reconnect to another node, finish their one job there, report its real
// status and exit by themselves (a scaler-managed agent is single-use).
// The stopping node only has to let go of them instead of destroying them.
//
// Who cleans up afterwards:
//   - a bare-metal agent is a process of its own group; when the stopping
//     orchestrator exits, the kernel re-parents it to the nearest
//     subreaper or init, which reaps it once it exits. Where it would die
//     with the orchestrator anyway (diesWithOrchestrator: PID 1 of a
//     container, or in the orchestrator's systemd cgroup) it is stopped
//     and cancels its job, as a node alone does. Its pid file stays
//     next to its log, so a restart of the same node sees whether it still
//     runs (LostAtStart) and drops the file once it has exited;
//   - a container agent keeps running in the engine; once it exited, a
//     node with a container scaler of the same name on that engine
//     removes it (ReapOrphans at start and reload, ReapExited on every
//     warm-pool pass).

// releaser is implemented by backends that can let go of a running agent
// without stopping it: after Release the backend no longer tracks id, its
// Shutdown leaves it running and its exit is not reported.
type releaser interface {
	Release(id string) bool
}

// HandOver is Shutdown for a node that stops while other nodes live: the
// agents running a job (connected and busy in the dispatcher's view) are
// released, not destroyed (they
// reconnect to another node and finish it); every other agent (queued,
// spawning, warm and idle) is destroyed as by Shutdown. It returns the
// ids of the agents handed over. Backends that cannot release (none
// today) destroy theirs.
func (m *Manager) HandOver(ctx context.Context) []string {
	// Spawns in flight end first: an agent whose spawn is cancelled is not
	// running a job and is destroyed with the rest.
	m.stopSpawning(ctx)
	// Busy is what the dispatcher sees: connected and running a job. An
	// agent started but not yet given its job is destroyed; its job stays
	// queued for the other nodes.
	var idle map[string]bool
	if fn := m.idleAgents(); fn != nil {
		idle = fn()
	}
	m.mu.Lock()
	var kept []string
	for id, rec := range m.agents {
		if isIdle, connected := idle[id]; rec.state != AgentRunning || !connected || isIdle {
			continue
		}
		if r, ok := rec.sc.backend.(releaser); ok && r.Release(id) {
			kept = append(kept, id)
			delete(m.agents, id)
		}
	}
	m.mu.Unlock()
	m.shutdownBackends(ctx)
	return kept
}

// exitedReaper is implemented by backends whose agents can outlive the
// node that started them and need removing once exited (containers).
type exitedReaper interface {
	ReapExited(ctx context.Context) (int, error)
}

// reapExited removes, through each backend that can, the exited agents no
// node tracks any more (handed over, then done). Called on every
// warm-pool pass.
func (m *Manager) reapExited() {
	m.mu.Lock()
	var reps []exitedReaper
	for _, sc := range m.scalers {
		if r, ok := sc.backend.(exitedReaper); ok {
			reps = append(reps, r)
		}
	}
	m.mu.Unlock()
	for _, r := range reps {
		ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
		if n, err := r.ReapExited(ctx); err != nil {
			m.log.Warn("reap exited agents", "err", err)
		} else if n > 0 {
			m.log.Info("removed exited agents handed over by a stopped node", "count", n)
		}
		cancel()
	}
}

// diesWithOrchestrator says why an agent process pid cannot outlive this
// orchestrator process, or "" when it can: as PID 1 of a container the
// orchestrator's exit ends the container and every process in it; under
// systemd (INVOCATION_ID set) the unit's stop kills what remains in its
// control group once the main process exited (KillMode=mixed or
// control-group), so an agent in the orchestrator's own cgroup dies too.
// An agent in a scope of its own (enforceCgroups: systemd-run --scope)
// survives.
func diesWithOrchestrator(pid int) string {
	if os.Getpid() == 1 {
		return "the orchestrator is PID 1 of its container"
	}
	if os.Getenv("INVOCATION_ID") == "" {
		return ""
	}
	self, err1 := os.ReadFile("/proc/self/cgroup")
	agent, err2 := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err1 == nil && err2 == nil && bytes.Equal(self, agent) {
		return "it runs in the orchestrator's systemd unit cgroup"
	}
	return ""
}
