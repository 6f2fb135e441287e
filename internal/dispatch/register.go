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
func (d *Dispatcher) register(ctx context.Context, c *agentConn, tok *store.AgentToken, reg *protocol.AgentRegister) bool {
	if !validAgentID(reg.AgentID) {
		d.invalid(c, "invalid agentId")
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

	shared, ok := d.checkShared(ctx, c, tok.ID, reg)
	if !ok {
		return false
	}
	// routeMu: no reservation may be in flight while slots are recounted.
	d.routeMu.Lock()
	d.mu.Lock()
	if c.id != "" && c.id != reg.AgentID {
		d.mu.Unlock()
		d.routeMu.Unlock()
		d.invalid(c, "agent id changed on a registered socket")
		return false
	}
	var old *agentConn
	cur := d.agents[reg.AgentID]
	// A re-registration on the same socket continues its session; from
	// another socket only the session's resume token does (session.go).
	resumed := cur == c || d.resumesLocked(reg.AgentID, tok.ID, reg.ResumeToken) || shared.resumed
	if cur != nil && cur != c {
		if cur.tokenID != tok.ID {
			d.mu.Unlock()
			d.routeMu.Unlock()
			c.close(protocol.CloseInvalidMessage, "agent id already connected with another token")
			return false
		}
		if !resumed {
			d.mu.Unlock()
			d.routeMu.Unlock()
			d.log.Warn("refusing a second connection for a live agent id without its resume token", "agent", reg.AgentID)
			c.close(protocol.CloseInvalidMessage, "agent id already connected; a reconnect must present its session's resume token")
			return false
		}
		old = cur
		old.replaced = true
	}
	// A new session for an id whose previous session this process knows
	// reclaims none of that session's jobs: they are lost.
	claims := resumed || (!d.knownSessionLocked(reg.AgentID) && !shared.exists)
	switch {
	case cur == c:
	case resumed:
		c.resume = reg.ResumeToken
		if shared.resumed {
			d.adoptSessionLocked(reg.AgentID, tok.ID, reg.ResumeToken) // opened by another node
		}
	default:
		c.resume = d.startSessionLocked(reg.AgentID, tok.ID)
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
	d.agents[c.id] = c
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
	for id, js := range d.jobs {
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
	d.mu.Unlock()
	d.routeMu.Unlock()
	if old != nil {
		d.log.Info("agent socket replaced", "agent", c.id)
		old.close(protocol.CloseNormal, "replaced by a newer connection")
	}
	for jobID := range inFlight {
		d.adopt(ctx, c, jobID)
	}
	d.settleReconnect(ctx, c.id, reclaimed, lost)

	pending := d.boundJobPending(ctx, c)
	// Raise the frame cap before the ack goes out: an agent with a backlog
	// answers the ack at once with a full-size log chunk, and the reader
	// takes a frame's cap when its header arrives, which could otherwise
	// be before serveAgent raised it (the connection then died on the
	// pre-auth cap and the agent's job failed as lost).
	c.ws.SetReadLimit(protocol.MaxFrameBytes)
	ack := &protocol.RegisterAck{Type: protocol.TypeRegisterAck, AgentID: c.id, Labels: c.labels,
		ScalerManaged: c.scalerManaged, PendingDispatch: pending, ResumeToken: c.resume,
		LogAcks: reg.LogAcks && d.logs != nil, StatusAcks: reg.StatusAcks}
	c.statusAcks = reg.StatusAcks
	// The agent becomes dispatchable as the ack is written; holding sendMu
	// keeps any job.dispatch behind the ack on the wire.
	d.registering.Add(1)
	defer d.registering.Add(-1)
	c.sendMu.Lock()
	d.mu.Lock()
	c.ready = true
	d.mu.Unlock()
	err := c.sendLocked(ack)
	c.sendMu.Unlock()
	if err != nil {
		return false
	}
	d.holdShared(ctx, c)
	d.log.Info("agent registered", "agent", c.id, "labels", c.labels, "scalerManaged", c.scalerManaged)
	d.drain(ctx, c)
	if d.spawner != nil && c.scalerManaged {
		d.spawner.AgentRegistered(c.id)
	}
	d.mu.Lock()
	delete(d.spawns, c.id)
	d.mu.Unlock()
	return true
}

// adopt resumes tracking of a job an agent reports in flight that this
// process does not track (e.g. after an orchestrator restart), when the
// store says the job runs on that agent.
func (d *Dispatcher) adopt(ctx context.Context, c *agentConn, jobID string) {
	job, err := d.st.GetJob(ctx, jobID)
	if err == nil && job.AgentID == "" && !job.Status.IsTerminal() {
		// Dispatched to this agent but not reported running before the
		// restart: the queue entry names the agent.
		if e, qerr := d.queueEntry(ctx, jobID, store.QueueDispatched); qerr == nil && e != nil && e.AgentID == c.id {
			job.AgentID = c.id
		}
	}
	if err != nil || job.AgentID != c.id || job.Status.IsTerminal() {
		d.log.Info("agent reports unknown in-flight job", "agent", c.id, "job", jobID)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobs[jobID] != nil {
		return
	}
	d.jobs[jobID] = &jobState{entry: store.QueueEntry{ID: jobID, RunID: job.RunID, JobName: job.JobName,
		RunsOnLabels: job.RunsOnLabels}, agentID: c.id, session: c.resume, started: true, acked: true, holdsSlot: true, lastSeq: -1}
	c.active++
	c.served++
	if job.Status == status.JobPending || job.Status == status.JobQueued || job.Status == status.JobRecovering {
		// The agent holds the job, so it has started it; its own "running"
		// report was lost with the previous orchestrator process, or the job
		// was waiting for this agent to come back.
		go d.markAdoptedStarted(jobID, c.id)
	}
}

// markAdoptedStarted records an adopted, not yet running job as started.
func (d *Dispatcher) markAdoptedStarted(jobID, agentID string) {
	ctx := d.ctx
	if err := d.st.AckQueueEntry(ctx, jobID, agentID); err != nil {
		d.log.Warn("ack adopted queue entry", "job", jobID, "err", err)
	}
	if ev := d.ev(); ev != nil {
		if err := ev.JobStarted(ctx, jobID, agentID, time.Now().UTC()); err != nil {
			d.log.Warn("job started event", "job", jobID, "err", err)
		}
	}
}
