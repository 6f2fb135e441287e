package dispatch

// Disconnect triage (KiCI: Agent disconnect triage).

import (
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// onDisconnect unregisters a closed socket and runs the disconnect triage
// described in the package documentation.
func (d *Dispatcher) onDisconnect(c *agentConn) {
	d.mu.Lock()
	delete(d.conns, c)
	if c.id == "" || c.replaced {
		d.mu.Unlock()
		return
	}
	current := d.agents[c.id] == c
	if current {
		delete(d.agents, c.id)
		if d.shared != nil && !d.closed {
			go d.releaseShared(c.id)
		}
	}
	if d.closed || (!current && !c.evicted) {
		d.mu.Unlock()
		return
	}
	type lost struct {
		id    string
		entry store.QueueEntry
	}
	var requeue, fail []lost
	var recovering []string
	for id, js := range d.jobs {
		if js.agentID != c.id || js.done {
			continue
		}
		switch {
		case !js.started:
			if js.ackTimer != nil {
				js.ackTimer.Stop()
			}
			delete(d.jobs, id)
			requeue = append(requeue, lost{id, js.entry})
		case c.ephemeral || c.scalerManaged:
			delete(d.jobs, id)
			fail = append(fail, lost{id, js.entry})
		default:
			js.holdsSlot = false // owned until the agent returns
			js.recoverBy = time.Now().Add(d.cfg.RecoveryWindow)
			recovering = append(recovering, id)
		}
	}
	if len(recovering) == 0 && !c.ephemeral && d.sessions[c.id] != nil && d.sessions[c.id].tokenID == c.tokenID {
		delete(d.sessions, c.id) // nothing left to reclaim
	}
	d.mu.Unlock()
	d.log.Info("agent disconnected", "agent", c.id, "requeued", len(requeue), "failed", len(fail), "recovering", len(recovering))
	ctx := d.ctx
	// A scaler-spawned agent cannot come back: its token dies with the socket.
	d.endEphemeralSession(ctx, c, "agent disconnected")
	d.markRecovering(ctx, recovering)
	for _, l := range requeue {
		d.requeueOrFail(ctx, l.id, &l.entry, "agent "+c.id+" disconnected before starting the job", c.id)
	}
	for _, l := range fail {
		if _, err := d.st.SetQueueStatus(ctx, l.id, []string{store.QueueDispatched}, store.QueueFailed); err != nil {
			d.log.Error("fail queue entry", "job", l.id, "err", err)
		}
		d.finishJob(ctx, l.id, status.JobFailed, "agent lost: scaler-managed agent "+c.id+" disconnected mid-execution")
	}
	if d.spawner != nil && c.scalerManaged {
		d.spawner.AgentDisconnected(c.id)
	}
}

// releaseShared marks agentID's shared session not live on this node.
func (d *Dispatcher) releaseShared(agentID string) {
	if err := d.shared.Release(d.ctx, agentID, d.nodeID); err != nil {
		d.log.Warn("release agent session", "agent", agentID, "err", err)
	}
}
