package dispatch

// Registration: the register-time gates, the agent registry, reclaiming
// and adopting in-flight jobs.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// register applies the register-time gates (label scope, ephemeral binding,
// id collision), installs the agent in the registry (replacing an older
// socket of the same agent and token), reconciles in-flight jobs, sends
// register.ack and drains the queue for it. It reports whether the agent is
// registered; on false the socket is closing.
func (r *registry) register(ctx context.Context, c *agentConn, tok *store.AgentToken, reg *protocol.AgentRegister) bool {
	if !validAgentID(reg.AgentID) {
		r.invalid(c, "invalid agentId")
		return false
	}
	if tok.Labels != nil {
		for _, l := range reg.Labels {
			if !isPlatformLabel(l) && !slices.Contains(tok.Labels, l) {
				c.close(protocol.CloseAuthFailed, fmt.Sprintf("label %q is outside the token's label scope", l))
				return false
			}
		}
	}
	if tok.Kind == store.AgentTokenEphemeral && tok.BoundAgentID != reg.AgentID {
		c.close(protocol.CloseAuthFailed, "token is bound to another agent id")
		return false
	}

	shared, ok := r.checkShared(ctx, c, tok.ID, reg)
	if !ok {
		return false
	}
	// routeMu: no reservation may be in flight while slots are recounted.
	r.q.routeMu.Lock()
	r.mu.Lock()
	if c.id != "" && c.id != reg.AgentID {
		r.mu.Unlock()
		r.q.routeMu.Unlock()
		r.invalid(c, "agent id changed on a registered socket")
		return false
	}
	var old *agentConn
	cur := r.agents[reg.AgentID]
	// A re-registration on the same socket continues its session; from
	// another socket only the session's resume token does (session.go).
	resumed := cur == c || r.resumesLocked(reg.AgentID, tok.ID, reg.ResumeToken) || shared.resumed
	if cur != nil && cur != c {
		if cur.tokenID != tok.ID {
			r.mu.Unlock()
			r.q.routeMu.Unlock()
			c.close(protocol.CloseInvalidMessage, "agent id already connected with another token")
			return false
		}
		if !resumed {
			r.mu.Unlock()
			r.q.routeMu.Unlock()
			r.log.Warn("refusing a second connection for a live agent id without its resume token", "agent", reg.AgentID)
			c.close(protocol.CloseInvalidMessage, "agent id already connected; a reconnect must present its session's resume token")
			return false
		}
		old = cur
		old.replaced = true
	}
	// A new session for an id whose previous session this process knows
	// reclaims none of that session's jobs: they are lost.
	claims := resumed || (!r.knownSessionLocked(reg.AgentID) && !shared.exists)
	switch {
	case cur == c:
	case resumed:
		c.resume = reg.ResumeToken
		if shared.resumed {
			r.adoptSessionLocked(reg.AgentID, tok.ID, reg.ResumeToken) // opened by another node
		}
	default:
		c.resume = r.startSessionLocked(reg.AgentID, tok.ID)
	}
	if cur != c {
		c.resumed = resumed
	}
	c.id = reg.AgentID
	c.tokenID = tok.ID
	c.labels = withMandatory(reg.Labels, c.mandatory)
	c.tokenLabels = tok.Labels
	c.scalerManaged = reg.ScalerManaged || tok.Kind == store.AgentTokenEphemeral
	c.ephemeral = tok.Kind == store.AgentTokenEphemeral
	c.version = reg.Version
	c.hostname = reg.Hostname
	c.lastSeen = time.Now().UTC()
	if reg.MaxConcurrency > 0 {
		c.maxConc = reg.MaxConcurrency
	}
	r.agents[c.id] = c
	// Reconcile jobs this agent id owns: those it still runs (or that are
	// dispatched and awaiting its ack) hold a slot; others stay owned for
	// late statuses but free their slot.
	inFlight := map[string]bool{}
	for _, j := range reg.InFlightJobs {
		if claims {
			inFlight[j.JobID] = true
		}
	}
	c.active = 0
	var reclaimed, lost []string
	for id, js := range r.jobs {
		if js.agentID != c.id || js.done {
			continue
		}
		js.holdsSlot = !js.started || inFlight[id]
		reclaimed, lost = js.reconcile(id, inFlight[id], reclaimed, lost)
		if js.holdsSlot {
			c.active++
			c.served++
		}
		delete(inFlight, id)
	}
	r.mu.Unlock()
	r.q.routeMu.Unlock()
	if old != nil {
		r.log.Info("agent socket replaced", "agent", c.id)
		old.close(protocol.CloseNormal, "replaced by a newer connection")
	}
	for jobID := range inFlight {
		r.adopt(ctx, c, jobID)
	}
	r.settleReconnect(ctx, c.id, reclaimed, lost)

	pending := r.q.boundJobPending(ctx, c)
	// Raise the frame cap before the ack goes out: an agent with a backlog
	// answers the ack at once with a full-size log chunk, and the reader
	// takes a frame's cap when its header arrives, which could otherwise
	// be before serveAgent raised it (the connection then died on the
	// pre-auth cap and the agent's job failed as lost).
	c.ws.SetReadLimit(protocol.MaxFrameBytes)
	ack := &protocol.RegisterAck{Type: protocol.TypeRegisterAck, AgentID: c.id, Labels: c.labels,
		ScalerManaged: c.scalerManaged, PendingDispatch: pending, ResumeToken: c.resume,
		LogAcks: reg.LogAcks && r.fr.logs != nil, StatusAcks: reg.StatusAcks}
	c.statusAcks = reg.StatusAcks
	// The agent becomes dispatchable as the ack is written; holding sendMu
	// keeps any job.dispatch behind the ack on the wire.
	r.q.registering.Add(1)
	defer r.q.registering.Add(-1)
	c.sendMu.Lock()
	r.mu.Lock()
	c.ready = true
	r.mu.Unlock()
	err := c.sendLocked(ack)
	c.sendMu.Unlock()
	if err != nil {
		return false
	}
	r.holdShared(ctx, c)
	r.log.Info("agent registered", "agent", c.id, "labels", c.labels, "scalerManaged", c.scalerManaged)
	r.q.drain(ctx, c)
	if r.spawner != nil && c.scalerManaged {
		r.spawner.AgentRegistered(c.id)
	}
	r.q.spawned(c.id)
	return true
}

// adopt resumes tracking of a job an agent reports in flight that this
// process does not track (e.g. after an orchestrator restart), when the
// store says the job runs on that agent.
func (r *registry) adopt(ctx context.Context, c *agentConn, jobID string) {
	job, err := r.st.GetJob(ctx, jobID)
	if err == nil && job.AgentID == "" && !job.Status.IsTerminal() {
		// Dispatched to this agent but not reported running before the
		// restart: the queue entry names the agent.
		if e, qerr := r.q.queueEntry(ctx, jobID, store.QueueDispatched); qerr == nil && e != nil && e.AgentID == c.id {
			job.AgentID = c.id
		}
	}
	if err != nil || job.AgentID != c.id || job.Status.IsTerminal() {
		r.log.Info("agent reports unknown in-flight job", "agent", c.id, "job", jobID)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs[jobID] != nil {
		return
	}
	r.jobs[jobID] = &jobState{entry: store.QueueEntry{ID: jobID, RunID: job.RunID, JobName: job.JobName,
		RunsOnLabels: job.RunsOnLabels}, agentID: c.id, session: c.resume, started: true, acked: true, holdsSlot: true, lastSeq: -1}
	c.active++
	c.served++
	if job.Status == status.JobPending || job.Status == status.JobQueued || job.Status == status.JobRecovering {
		// The agent holds the job, so it has started it; its own "running"
		// report was lost with the previous orchestrator process, or the job
		// was waiting for this agent to come back.
		go r.markAdoptedStarted(jobID, c.id)
	}
}

// markAdoptedStarted records an adopted, not yet running job as started.
func (r *registry) markAdoptedStarted(jobID, agentID string) {
	ctx := r.ctx
	if err := r.st.AckQueueEntry(ctx, jobID, agentID); err != nil {
		r.log.Warn("ack adopted queue entry", "job", jobID, "err", err)
	}
	if ev := r.fr.ev(); ev != nil {
		if err := ev.JobStarted(ctx, jobID, agentID, time.Now().UTC()); err != nil {
			r.log.Warn("job started event", "job", jobID, "err", err)
		}
	}
}
