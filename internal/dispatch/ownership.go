package dispatch

// The registry's operations on the jobs it tracks, for the queue (which
// starts tracking a dispatch) and the frame handler (which applies what
// agents report). Each takes registry.mu for its own duration only.

import (
	"slices"
	"time"
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
