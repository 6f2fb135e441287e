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

// setDraining turns orchestrator drain mode on or off. While draining, new
// and requeued jobs stay queued with the pending reason "draining", agents
// are handed nothing, and the Spawner is not consulted; jobs already on
// agents run to the end. Turning it off re-drives the queue at once.
func (q *jobQueue) setDraining(on bool) {
	q.mu.Lock()
	changed := q.drainMode != on
	q.drainMode = on
	q.mu.Unlock()
	if changed && !on {
		go q.redrive()
	}
}

// draining reports whether drain mode is on.
func (q *jobQueue) draining() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.drainMode
}

// jobsRunning is the number of jobs handed to agents and not finished
// (dispatched, running or being cancelled).
func (r *registry) jobsRunning() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, js := range r.jobs {
		if !js.done {
			n++
		}
	}
	return n
}

// noteAgentStatus records an agent's drain flag from agent.status: a
// draining agent (SIGUSR1, or a single-use agent after its job) is handed
// no new job (peer row 28: once draining is announced, no assignment).
func (r *registry) noteAgentStatus(c *agentConn, m *protocol.AgentStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Draining && !c.closing {
		r.log.Info("agent draining", "agent", c.id)
	}
	c.closing = m.Draining
}

// cancelHere is CancelJob for an agent connected to this node only (a
// cancel another node asked for).
func (r *registry) cancelHere(jobID, reason string, force bool) bool {
	r.mu.Lock()
	js := r.jobs[jobID]
	var a *agentConn
	if js != nil && !js.done {
		a = r.agents[js.agentID]
	}
	var runID string
	if js != nil {
		runID = js.entry.RunID
	}
	r.mu.Unlock()
	if a == nil {
		return false
	}
	err := a.send(&protocol.JobCancel{Type: protocol.TypeJobCancel, MessageID: uuid.NewString(),
		RunID: runID, JobID: jobID, Reason: reason, Force: force})
	if err != nil {
		r.log.Warn("send job.cancel failed", "job", jobID, "agent", a.id, "err", err)
		return false
	}
	r.log.Info("job cancel sent", "job", jobID, "agent", a.id, "force", force)
	return true
}

// abort is AbortJob past the cancel frame: it stops an agent spawned for
// jobID that has not registered yet, frees the slot of its agent, and
// fails the queue entry when pending or dispatched. It reports whether the
// queue entry changed.
func (q *jobQueue) abort(ctx context.Context, jobID string) bool {
	q.stopSpawnFor(jobID)
	freed := q.reg.abortTracked(jobID)
	q.forgetReason(jobID)
	q.pending.remove(jobID)
	changed, err := q.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed)
	if err != nil {
		q.log.Error("fail queue entry", "job", jobID, "err", err)
	}
	if freed {
		q.kickRedrive()
	}
	return changed
}

// abortTracked marks jobID's tracked state done (later statuses change
// nothing) and frees its agent's slot; it reports whether a slot of a
// registered agent was freed.
func (r *registry) abortTracked(jobID string) (freed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	js := r.jobs[jobID]
	if js == nil || js.done {
		return false
	}
	js.done = true
	js.doneAt = time.Now()
	if js.ackTimer != nil {
		js.ackTimer.Stop()
		js.ackTimer = nil
	}
	if js.holdsSlot {
		js.holdsSlot = false
		if a := r.agents[js.agentID]; a != nil {
			a.active--
			return true
		}
	}
	return false
}

// expireQueued moves a pending queue entry to expired (queue timeout, run
// cancelled), stops an agent spawned for it that has not registered yet and
// forgets its pending reason; it reports whether it changed.
func (q *jobQueue) expireQueued(ctx context.Context, jobID string) (bool, error) {
	changed, err := q.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueExpired)
	if err == nil {
		q.pending.remove(jobID)
	}
	q.stopSpawnFor(jobID)
	q.forgetReason(jobID)
	return changed, err
}
