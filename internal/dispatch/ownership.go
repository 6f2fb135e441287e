package dispatch

// Job ownership: the registry tracks the jobs handed to agents (their ack
// deadlines, slots, cancels) and applies the ownership rule to what agents
// send. The queue starts tracking a dispatch through it and the frame
// handler applies agents' reports through it; each operation takes
// registry.mu for its own duration only.

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
)

// track starts tracking js, dispatched to agent a (whose slot is
// reserved), and arms its ack deadline of ackIn.
func (r *registry) track(a *agentConn, js *jobState, ackIn time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	jobID := js.entry.ID
	if old := r.jobs[jobID]; old != nil && old.ackTimer != nil {
		old.ackTimer.Stop()
	}
	r.jobs[jobID] = js
	js.ackTimer = time.AfterFunc(ackIn, func() { r.ackExpired(jobID, js.agentID, a) })
}

// tracks reports whether jobID is tracked (handed to an agent here).
func (r *registry) tracks(jobID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.jobs[jobID]
	return ok
}

// reject untracks js, which agent c refused before starting it, and gives
// back its slot; false when js is no longer the live, unstarted dispatch
// of jobID.
func (r *registry) reject(c *agentConn, js *jobState, jobID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if js == nil || js.done || js.started || r.jobs[jobID] != js {
		return false
	}
	delete(r.jobs, jobID)
	if js.ackTimer != nil {
		js.ackTimer.Stop()
	}
	if js.holdsSlot {
		c.active--
		c.served--
	}
	return true
}

// startedOrDone reports whether js is untracked (nil), started or done.
func (r *registry) startedOrDone(js *jobState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return js == nil || js.started || js.done
}

// finishTracked marks js done after a terminal status and frees the slot
// it held; it reports whether it held one.
func (r *registry) finishTracked(js *jobState) (freed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if js == nil || js.done {
		return false
	}
	js.done = true
	js.doneAt = time.Now()
	if js.ackTimer != nil {
		js.ackTimer.Stop()
		js.ackTimer = nil
	}
	if !js.holdsSlot {
		return false
	}
	js.holdsSlot = false
	if a := r.agents[js.agentID]; a != nil {
		a.active--
	}
	return true
}

// newChunk records seq as the last log chunk of js and reports whether it
// is new (false: a replay of a chunk already stored). An untracked job
// (nil) takes every chunk.
func (r *registry) newChunk(js *jobState, seq int64) bool {
	if js == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq <= js.lastSeq {
		return false
	}
	js.lastSeq = seq
	return true
}

// runsLive reports whether js is live on socket c (tracked, not finished,
// c its agent's registered socket), and js's run id ("" when untracked).
func (r *registry) runsLive(c *agentConn, js *jobState) (live bool, runID string) {
	if js == nil {
		return false, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !js.done && js.agentID == c.id && r.agents[c.id] == c, js.entry.RunID
}

// touch records that a frame arrived from c now.
func (r *registry) touch(c *agentConn) {
	r.mu.Lock()
	c.lastSeen = time.Now().UTC()
	r.mu.Unlock()
}

// singleUse reports whether a is a scaler-managed (single-use) agent.
func (r *registry) singleUse(a *agentConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return a.scalerManaged
}

// facts describes agent a for the job data resolver.
func (r *registry) facts(a *agentConn) AgentFacts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return AgentFacts{ID: a.id, Hostname: a.hostname, Labels: withMandatory(a.labels, a.mandatory), TokenLabels: a.tokenLabels}
}

// routingLabels returns copies of what routing matches agent a on: its
// labels, its token's mandatory labels and its token's label scope.
func (r *registry) routingLabels(a *agentConn) (labels, mandatory, tokenLabels []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(a.labels), slices.Clone(a.mandatory), slices.Clone(a.tokenLabels)
}

// ackExpired handles a dispatch that agent a did not acknowledge in time:
// untrack, best-effort job.cancel, unregister the agent (so the requeue
// cannot pick it again), close 4031, then requeue-or-fail.
func (r *registry) ackExpired(jobID, agentID string, a *agentConn) {
	r.mu.Lock()
	js := r.jobs[jobID]
	if js == nil || js.agentID != agentID || js.acked || js.started || js.done || r.closed {
		r.mu.Unlock()
		return
	}
	delete(r.jobs, jobID)
	if js.holdsSlot {
		a.active--
	}
	if r.agents[agentID] == a {
		delete(r.agents, agentID)
	}
	a.evicted = true
	r.mu.Unlock()

	r.log.Warn("dispatch ack timeout", "job", jobID, "agent", agentID)
	go func() {
		_ = a.send(&protocol.JobCancel{Type: protocol.TypeJobCancel, MessageID: uuid.NewString(),
			RunID: js.entry.RunID, JobID: jobID, Reason: "dispatch ack timeout"})
		a.close(protocol.CloseAckTimeout, "dispatch ack timeout")
	}()
	r.q.requeueOrFail(r.ctx, jobID, &js.entry, "dispatch ack timeout", agentID)
}

// owns applies the ownership rule: the job is tracked for this agent (also
// up to 30 s after it finished), or the store shows it terminal and not run
// by another agent. js is nil when only the store vouched.
func (r *registry) owns(ctx context.Context, c *agentConn, jobID string) (*jobState, bool) {
	r.mu.Lock()
	js := r.jobs[jobID]
	if js != nil && (js.agentID != c.id || js.session != c.resume) {
		// Tracked here, and not this session's: a socket that registered
		// the same agent id afresh (the agent restarted, or another
		// token's holder took the idle id) writes nothing into it.
		r.mu.Unlock()
		return nil, false
	}
	if js != nil && (!js.done || time.Since(js.doneAt) <= ownershipGrace) {
		r.mu.Unlock()
		return js, true
	}
	verified := js != nil || c.resumed
	r.mu.Unlock()
	// Late frames for a finished job past the grace, or one this process
	// does not track (it ran on another node, or before a restart): only
	// from the agent that ran it, proven by its session's resume token.
	if !verified {
		return nil, false
	}
	job, err := r.st.GetJob(ctx, jobID)
	if err != nil {
		return nil, false
	}
	if job.Status.IsTerminal() && job.AgentID == c.id {
		return nil, true
	}
	return nil, false
}

// violation records a message about a job the agent does not own; five
// within a minute close the socket with 1001.
func (r *registry) violation(c *agentConn, jobID string) bool {
	now := time.Now()
	r.mu.Lock()
	kept := c.violations[:0]
	for _, t := range c.violations {
		if now.Sub(t) < time.Minute {
			kept = append(kept, t)
		}
	}
	c.violations = append(kept, now)
	n := len(c.violations)
	r.mu.Unlock()
	r.log.Warn("dropping message for a job the agent does not own", "agent", c.id, "job", jobID, "violations", n)
	if n >= 5 {
		c.close(protocol.CloseGoingAway, "repeated job ownership violations")
		return false
	}
	return true
}

// markAcked resolves the ack deadline of an owned, live job once. started
// also marks it running. It reports whether this call resolved the ack.
func (r *registry) markAcked(c *agentConn, js *jobState, started bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if js == nil || js.done || js.agentID != c.id {
		return false
	}
	first := !js.acked
	js.acked = true
	if first {
		r.observeAckLocked(js)
	}
	if started {
		js.started = true
	}
	if js.ackTimer != nil {
		js.ackTimer.Stop()
		js.ackTimer = nil
	}
	return first
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
