package dispatch

// Disconnect triage (see docs/kici-compatibility.md#runs-and-statuses).

import (
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// onDisconnect unregisters a closed socket and runs the disconnect triage
// described in the package documentation.
func (r *registry) onDisconnect(c *agentConn) {
	r.mu.Lock()
	delete(r.conns, c)
	if c.id == "" || c.replaced {
		r.mu.Unlock()
		return
	}
	current := r.agents[c.id] == c
	if current {
		delete(r.agents, c.id)
		if r.shared != nil && !r.closed {
			go r.releaseShared(c.id)
		}
	}
	if r.closed || (!current && !c.evicted) {
		r.mu.Unlock()
		return
	}
	type lost struct {
		id    string
		entry store.QueueEntry
	}
	var requeue, fail []lost
	var recovering []string
	for id, js := range r.jobs {
		if js.agentID != c.id || js.done {
			continue
		}
		switch {
		case !js.started:
			if js.ackTimer != nil {
				js.ackTimer.Stop()
			}
			delete(r.jobs, id)
			requeue = append(requeue, lost{id, js.entry})
		case c.ephemeral || c.scalerManaged:
			delete(r.jobs, id)
			fail = append(fail, lost{id, js.entry})
		default:
			js.holdsSlot = false // owned until the agent returns
			js.recoverBy = time.Now().Add(r.cfg.RecoveryWindow)
			recovering = append(recovering, id)
		}
	}
	if len(recovering) == 0 && !c.ephemeral && r.sessions[c.id] != nil && r.sessions[c.id].tokenID == c.tokenID {
		delete(r.sessions, c.id) // nothing left to reclaim
	}
	r.mu.Unlock()
	r.log.Info("agent disconnected", "agent", c.id, "requeued", len(requeue), "failed", len(fail), "recovering", len(recovering))
	ctx := r.ctx
	// A scaler-spawned agent cannot come back: its token dies with the socket.
	r.endEphemeralSession(ctx, c, "agent disconnected")
	r.markRecovering(ctx, recovering)
	for _, l := range requeue {
		r.q.requeueOrFail(ctx, l.id, &l.entry, "agent "+c.id+" disconnected before starting the job", c.id)
	}
	for _, l := range fail {
		if _, err := r.st.SetQueueStatus(ctx, l.id, []string{store.QueueDispatched}, store.QueueFailed); err != nil {
			r.log.Error("fail queue entry", "job", l.id, "err", err)
		}
		r.fr.finishJob(ctx, l.id, status.JobFailed, "agent lost: scaler-managed agent "+c.id+" disconnected mid-execution")
	}
	if r.spawner != nil && c.scalerManaged {
		r.spawner.AgentDisconnected(c.id)
	}
}

// releaseShared marks agentID's shared session not live on this node.
func (r *registry) releaseShared(agentID string) {
	if err := r.shared.Release(r.ctx, agentID, r.nodeID); err != nil {
		r.log.Warn("release agent session", "agent", agentID, "err", err)
	}
}
