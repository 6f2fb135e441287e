package dispatch

import (
	"context"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// reasonDraining is the pending reason of a job held back by orchestrator
// drain mode (KiCI [0.9.1] isDraining predicate).
const reasonDraining = "draining"

// SetDraining turns orchestrator drain mode on or off. While draining, new
// and requeued jobs stay queued with the pending reason "draining", agents
// are handed nothing, and the Spawner is not consulted; jobs already on
// agents run to the end. Turning it off re-drives the queue at once.
func (d *Dispatcher) SetDraining(on bool) {
	d.mu.Lock()
	changed := d.draining != on
	d.draining = on
	d.mu.Unlock()
	if changed && !on {
		go d.redrive()
	}
}

// Draining reports whether drain mode is on.
func (d *Dispatcher) Draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// JobsRunning is the number of jobs handed to agents and not finished
// (dispatched, running or being cancelled).
func (d *Dispatcher) JobsRunning() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, js := range d.jobs {
		if !js.done {
			n++
		}
	}
	return n
}

// AgentConnected reports whether agentID has a registered socket.
func (d *Dispatcher) AgentConnected(agentID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[agentID]
	return a != nil
}

// noteAgentStatus records an agent's drain flag from agent.status: a
// draining agent (SIGUSR1, or a single-use agent after its job) is handed
// no new job (peer row 28: once draining is announced, no assignment).
func (d *Dispatcher) noteAgentStatus(c *agentConn, m *protocol.AgentStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.Draining && !c.closing {
		d.log.Info("agent draining", "agent", c.id)
	}
	c.closing = m.Draining
}

// CancelJob sends job.cancel {reason, force} to the agent that owns jobID,
// connected to this node or, in a cluster, to another (asked through Peers,
// with a bounded wait for its answer). It reports whether a node wrote the
// frame: false when the job is on no connected agent (the caller then ends
// the job itself).
func (d *Dispatcher) CancelJob(jobID, reason string, force bool) bool {
	if d.CancelJobHere(jobID, reason, force) {
		return true
	}
	return d.peers != nil && d.peers.CancelJob(jobID, reason, force, true)
}

// CancelJobHere is CancelJob for an agent connected to this node only (a
// cancel another node asked for).
func (d *Dispatcher) CancelJobHere(jobID, reason string, force bool) bool {
	d.mu.Lock()
	js := d.jobs[jobID]
	var a *agentConn
	if js != nil && !js.done {
		a = d.agents[js.agentID]
	}
	var runID string
	if js != nil {
		runID = js.entry.RunID
	}
	d.mu.Unlock()
	if a == nil {
		return false
	}
	err := a.send(&protocol.JobCancel{Type: protocol.TypeJobCancel, MessageID: uuid.NewString(),
		RunID: runID, JobID: jobID, Reason: reason, Force: force})
	if err != nil {
		d.log.Warn("send job.cancel failed", "job", jobID, "agent", a.id, "err", err)
		return false
	}
	d.log.Info("job cancel sent", "job", jobID, "agent", a.id, "force", force)
	return true
}

// AbortJob ends the dispatcher's part in a job the orchestrator itself
// terminated (deadline, stale heartbeat, cancel without an agent): a forced
// job.cancel goes to its agent when one is connected, an agent spawned for
// it that has not registered yet is stopped, the agent's slot is
// freed, and the queue entry leaves pending/dispatched as failed. Later
// statuses from the agent are accepted and change nothing. It reports
// whether the queue entry changed.
func (d *Dispatcher) AbortJob(ctx context.Context, jobID, reason string) bool {
	if !d.CancelJobHere(jobID, reason, true) && d.peers != nil {
		d.peers.CancelJob(jobID, reason, true, false) // the job ends here anyway: no wait
	}
	d.stopSpawnFor(jobID)
	freed := false
	d.mu.Lock()
	if js := d.jobs[jobID]; js != nil && !js.done {
		js.done = true
		js.doneAt = time.Now()
		if js.ackTimer != nil {
			js.ackTimer.Stop()
			js.ackTimer = nil
		}
		if js.holdsSlot {
			js.holdsSlot = false
			if a := d.agents[js.agentID]; a != nil {
				a.active--
				freed = true
			}
		}
	}
	delete(d.reasons, jobID)
	d.mu.Unlock()
	d.pending.remove(jobID)
	changed, err := d.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed)
	if err != nil {
		d.log.Error("fail queue entry", "job", jobID, "err", err)
	}
	if freed {
		d.kickRedrive()
	}
	return changed
}

// ExpireQueued moves a pending queue entry to expired (queue timeout, run
// cancelled), stops an agent spawned for it that has not registered yet and
// forgets its pending reason; it reports whether it changed.
func (d *Dispatcher) ExpireQueued(ctx context.Context, jobID string) (bool, error) {
	changed, err := d.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueExpired)
	if err == nil {
		d.pending.remove(jobID)
	}
	d.stopSpawnFor(jobID)
	d.mu.Lock()
	delete(d.reasons, jobID)
	d.mu.Unlock()
	return changed, err
}
