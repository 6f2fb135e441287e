package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// Pending reasons written on queued jobs (contracts: store.Job.PendingReason).
const (
	reasonNoAgent     = "no agent online"
	reasonAllBusy     = "all matching agents busy"
	reasonSpawningFmt = "spawning agent %s"
)

// EnqueueJob puts a ready job (status queued) in the dispatch queue and
// routes it at once: to an idle matching agent, else to a spawned agent,
// else it waits with a pending reason. Exclude labels are read from the
// job's lock config (exact matchers). An entry that already exists for the
// job is routed again rather than duplicated. Errors are store failures
// while enqueueing; routing problems only leave the job waiting.
func (d *Dispatcher) EnqueueJob(ctx context.Context, job *store.Job) error {
	e := &store.QueueEntry{
		ID:            job.ID,
		RunID:         job.RunID,
		JobName:       job.JobName,
		RunsOnLabels:  append([]string{}, job.RunsOnLabels...),
		ExcludeLabels: excludeLabels(job.Config),
		Status:        store.QueuePending,
		CreatedAt:     time.Now().UTC(),
	}
	if err := d.st.Enqueue(ctx, e); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("dispatch: enqueue job %s: %w", job.ID, err)
		}
		existing, err := d.queueEntry(ctx, job.ID, store.QueuePending)
		if err != nil || existing == nil {
			return err
		}
		e = existing
	}
	d.pending.put(e)
	d.route(ctx, e, "")
	return nil
}

// excludeLabels extracts the exact exclude matchers of a lock job config.
func excludeLabels(config json.RawMessage) []string {
	if len(config) == 0 {
		return nil
	}
	var cfg struct {
		ExcludeLabels []struct {
			Kind  string `json:"kind"`
			Value string `json:"value"`
		} `json:"excludeLabels"`
	}
	if json.Unmarshal(config, &cfg) != nil {
		return nil
	}
	var out []string
	for _, m := range cfg.ExcludeLabels {
		if m.Kind == "exact" && m.Value != "" {
			out = append(out, m.Value)
		}
	}
	return out
}

// queueEntry finds one queue entry by id among entries in statuses: from
// the pending index when it holds it and pending is asked for, else from
// the store (a rare path: a job enqueued twice, e.g. by recovery).
func (d *Dispatcher) queueEntry(ctx context.Context, id string, statuses ...string) (*store.QueueEntry, error) {
	if len(statuses) == 1 && statuses[0] == store.QueuePending {
		if e, ok := d.pending.get(id); ok {
			return e, nil
		}
	}
	list, err := d.st.ListQueue(ctx, statuses)
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		if e.ID == id {
			return e, nil
		}
	}
	return nil, nil
}

// labelsMatch reports whether an agent with agentLabels may run an entry:
// every runsOn label present, no exclude label present.
func labelsMatch(agentLabels, runsOn, exclude []string) bool {
	for _, l := range runsOn {
		if !slices.Contains(agentLabels, l) {
			return false
		}
	}
	for _, l := range exclude {
		if slices.Contains(agentLabels, l) {
			return false
		}
	}
	return true
}

// canTakeLocked reports whether agent a has a free slot for new work.
// Caller holds d.mu.
func (a *agentConn) canTakeLocked() bool {
	if !a.ready || a.closing || a.active >= a.maxConc {
		return false
	}
	// A scaler-managed agent is single-use: it runs one job, then exits.
	return !a.scalerManaged || a.served == 0
}

// reserveIdle picks the idle agent with the lowest id that may take e
// (skipping exclude) and reserves one of its slots.
func (d *Dispatcher) reserveIdle(e *store.QueueEntry, exclude string) *agentConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best *agentConn
	for id, a := range d.agents {
		if id == exclude || !a.canTakeLocked() {
			continue
		}
		if e.PinnedAgentID != "" && e.PinnedAgentID != id {
			continue
		}
		if !agentFitsLocked(a, e) {
			continue
		}
		if best == nil || id < best.id {
			best = a
		}
	}
	if best != nil {
		best.active++
		best.served++
	}
	return best
}

// reserve takes a slot on a registered agent for a drain.
func (d *Dispatcher) reserve(a *agentConn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.agents[a.id] != a || !a.canTakeLocked() {
		return false
	}
	a.active++
	a.served++
	return true
}

// release gives back a slot reserved by reserve or reserveIdle that was not
// used.
func (d *Dispatcher) release(a *agentConn) {
	d.mu.Lock()
	a.active--
	a.served--
	d.mu.Unlock()
}

// noAgentReason says why no connected agent took e; when agents have its
// labels but none has a token minted for the host it pins, it says so.
func (d *Dispatcher) noAgentReason(e *store.QueueEntry) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.agents) == 0 {
		return reasonNoAgent
	}
	unvouched := ""
	for _, a := range d.agents {
		if agentFitsLocked(a, e) {
			return reasonAllBusy
		}
		// Would fit if its token were minted for the hosts e pins: an
		// agent claiming the host on a token that does not vouch for it.
		if agentFits(a.labels, a.mandatory, e.RunsOnLabels, e.RunsOnLabels, e.ExcludeLabels) {
			unvouched = UnvouchedHost(e.RunsOnLabels, a.tokenLabels)
		}
	}
	if unvouched != "" {
		return hostTokenReason(unvouched)
	}
	labels := append([]string{}, e.RunsOnLabels...)
	sort.Strings(labels)
	return fmt.Sprintf("no agent with labels [%s]", strings.Join(labels, " "))
}

// setReason writes a queued job's pending reason when it changed and the
// job still waits in the queue (routing writes it after releasing routeMu,
// by which time the job may have been dispatched).
func (d *Dispatcher) setReason(ctx context.Context, jobID, reason string) {
	if !d.pending.has(jobID) {
		return
	}
	d.mu.Lock()
	if prev, ok := d.reasons[jobID]; ok && prev == reason {
		d.mu.Unlock()
		return
	}
	d.reasons[jobID] = reason
	d.mu.Unlock()
	if _, err := d.st.UpdateJobStatus(ctx, jobID, []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &reason}); err != nil {
		d.log.Warn("write pending reason", "job", jobID, "err", err)
	}
}

// drain hands pending entries to agent a while it has free slots: first the
// entry pinned to it (its bound job), then the oldest entry its labels fit.
func (d *Dispatcher) drain(ctx context.Context, a *agentConn) {
	for {
		d.routeMu.Lock()
		out, more := d.drainOne(ctx, a)
		d.routeMu.Unlock()
		d.send(out)
		if !more {
			return
		}
	}
}

func (d *Dispatcher) drainOne(ctx context.Context, a *agentConn) (*outgoing, bool) {
	if d.Draining() {
		return nil, false
	}
	if !d.reserve(a) {
		return nil, false
	}
	deadline := time.Now().Add(d.ackTimeout(ctx)).UTC()
	var e *store.QueueEntry
	var err error
	if bound := d.boundJob(ctx, a); bound != "" {
		e, err = d.claimEntry(ctx, bound, a.id, deadline)
	}
	if e == nil && err == nil {
		e, err = d.claimNext(ctx, a, deadline)
	}
	if err != nil || e == nil {
		d.release(a)
		if err != nil {
			d.log.Error("drain queue", "agent", a.id, "err", err)
		}
		return nil, false
	}
	return d.prepare(ctx, a, e), true
}

// outgoing is a job.dispatch ready to be written to its agent.
type outgoing struct {
	a   *agentConn
	msg *protocol.JobDispatch
}

// prepare turns a claimed entry for agent a (whose slot is reserved) into a
// tracked dispatch with an armed ack deadline. It returns nil when there is
// nothing to send (the job ended meanwhile, or its rows could not be read:
// the entry is then expired or requeued and the slot released).
func (d *Dispatcher) prepare(ctx context.Context, a *agentConn, e *store.QueueEntry) *outgoing {
	msg, terminal, err := d.buildDispatch(ctx, a, e)
	if err != nil || terminal {
		d.release(a)
		if terminal {
			// The job ended while queued (e.g. cancelled): drop the entry.
			_, _ = d.st.SetQueueStatus(ctx, e.ID, []string{store.QueueDispatched}, store.QueueExpired)
			return nil
		}
		d.log.Error("build job.dispatch", "job", e.ID, "err", err)
		n, ok, rerr := d.st.RequeueEntry(ctx, e.ID)
		if rerr != nil || !ok {
			d.log.Error("requeue after build failure", "job", e.ID, "err", rerr)
			return nil
		}
		back := *e
		back.Status, back.AgentID, back.Attempts, back.AckDeadline = store.QueuePending, "", n, nil
		d.pending.put(&back)
		return nil
	}
	js := &jobState{entry: *e, agentID: a.id, session: a.resume, holdsSlot: true, lastSeq: -1}
	ackIn := d.ackWait(ctx, e)
	d.mu.Lock()
	if old := d.jobs[e.ID]; old != nil && old.ackTimer != nil {
		old.ackTimer.Stop()
	}
	d.jobs[e.ID] = js
	delete(d.reasons, e.ID)
	jobID, agentID := e.ID, a.id
	js.ackTimer = time.AfterFunc(ackIn, func() { d.ackExpired(jobID, agentID, a) })
	d.mu.Unlock()

	empty := ""
	if _, err := d.st.UpdateJobStatus(ctx, e.ID, []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &empty}); err != nil {
		d.log.Warn("clear pending reason", "job", e.ID, "err", err)
	}
	return &outgoing{a: a, msg: msg}
}

// send writes a prepared dispatch. A failed write closes the socket; the
// disconnect triage then requeues the unstarted job.
func (d *Dispatcher) send(out *outgoing) {
	if out == nil {
		return
	}
	if err := out.a.send(out.msg); err != nil {
		d.log.Warn("send job.dispatch failed; closing agent", "job", out.msg.JobID, "agent", out.a.id, "err", err)
		out.a.close(protocol.CloseInternalError, "send failed")
		return
	}
	d.log.Info("job dispatched", "job", out.msg.JobID, "agent", out.a.id)
}

// buildDispatch assembles job.dispatch from the job and run rows. terminal
// is true when the job no longer needs to run.
func (d *Dispatcher) buildDispatch(ctx context.Context, a *agentConn, e *store.QueueEntry) (*protocol.JobDispatch, bool, error) {
	job, err := d.st.GetJob(ctx, e.ID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, true, nil
		}
		return nil, false, err
	}
	if job.Status.IsTerminal() {
		return nil, true, nil
	}
	run, err := d.st.GetRun(ctx, job.RunID)
	if err != nil {
		return nil, false, err
	}
	data, err := d.resolveJobData(ctx, run, job, a)
	if err != nil {
		return nil, false, err
	}
	msg, err := runs.LoadJobDispatch(ctx, d.st, run, job)
	if err != nil {
		return nil, false, err
	}
	msg.Secrets, msg.ContextVars = data.Secrets, data.ContextVars
	msg.JobCredential = data.JobCredential
	msg.Untrusted = run.TrustTier == store.TrustUnknown
	return msg, false, nil
}

// ackExpired handles a dispatch that agent a did not acknowledge in time:
// untrack, best-effort job.cancel, unregister the agent (so the requeue
// cannot pick it again), close 4031, then requeue-or-fail.
func (d *Dispatcher) ackExpired(jobID, agentID string, a *agentConn) {
	d.mu.Lock()
	js := d.jobs[jobID]
	if js == nil || js.agentID != agentID || js.acked || js.started || js.done || d.closed {
		d.mu.Unlock()
		return
	}
	delete(d.jobs, jobID)
	if js.holdsSlot {
		a.active--
	}
	if d.agents[agentID] == a {
		delete(d.agents, agentID)
	}
	a.evicted = true
	d.mu.Unlock()

	d.log.Warn("dispatch ack timeout", "job", jobID, "agent", agentID)
	go func() {
		_ = a.send(&protocol.JobCancel{Type: protocol.TypeJobCancel, MessageID: uuid.NewString(),
			RunID: js.entry.RunID, JobID: jobID, Reason: "dispatch ack timeout"})
		a.close(protocol.CloseAckTimeout, "dispatch ack timeout")
	}()
	d.requeueOrFail(d.ctx, jobID, &js.entry, "dispatch ack timeout", agentID)
}

// requeueOrFail puts a dispatched entry back to pending with attempts+1 and
// routes it again (never to exclude); at MaxAttempts the entry and the job
// fail with "re-dispatch attempts exhausted after N attempts (why)".
func (d *Dispatcher) requeueOrFail(ctx context.Context, jobID string, e *store.QueueEntry, why, exclude string) {
	n, ok, err := d.st.RequeueEntry(ctx, jobID)
	if err != nil {
		d.log.Error("requeue", "job", jobID, "err", err)
		return
	}
	if !ok {
		return
	}
	if n >= d.cfg.MaxAttempts {
		if _, err := d.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueFailed); err != nil {
			d.log.Error("fail queue entry", "job", jobID, "err", err)
		}
		d.mu.Lock()
		delete(d.reasons, jobID)
		d.mu.Unlock()
		msg := fmt.Sprintf("re-dispatch attempts exhausted after %d attempts (%s)", n, why)
		d.log.Warn("job failed", "job", jobID, "reason", msg)
		d.finishJob(ctx, jobID, status.JobFailed, msg)
		return
	}
	re := *e
	re.Status = store.QueuePending
	re.AgentID = ""
	re.Attempts = n
	re.AckDeadline = nil
	d.pending.put(&re)
	if re.PinnedAgentID != "" {
		// The bound agent failed this job: any agent may take it now.
		if err := d.pinEntry(ctx, jobID, ""); err == nil {
			re.PinnedAgentID = ""
		}
	}
	d.route(ctx, &re, exclude)
}

// finishJob reports a terminal job status to the events receiver.
func (d *Dispatcher) finishJob(ctx context.Context, jobID string, final status.Job, msg string) {
	if ev := d.ev(); ev != nil {
		if err := ev.JobFinished(ctx, jobID, final, msg, time.Now().UTC()); err != nil {
			d.log.Error("job finished event", "job", jobID, "err", err)
		}
	}
}

// expireSpawns gives up on spawned agents that did not register in time:
// stops them and unpins their jobs for the re-drive.
func (d *Dispatcher) expireSpawns() {
	now := time.Now()
	d.mu.Lock()
	var expired []string
	for id, rec := range d.spawns {
		if now.After(rec.deadline) {
			expired = append(expired, id)
		}
	}
	d.mu.Unlock()
	for _, id := range expired {
		d.log.Warn("spawned agent did not register in time", "agent", id)
		d.forgetSpawn(id)
		if d.spawner != nil {
			d.spawner.Stop(id)
		}
	}
}

// forgetSpawn drops a spawn record and unpins its job if still pending.
func (d *Dispatcher) forgetSpawn(agentID string) {
	d.mu.Lock()
	rec, ok := d.spawns[agentID]
	delete(d.spawns, agentID)
	registered := d.agents[agentID] != nil
	d.mu.Unlock()
	if !ok || registered {
		return
	}
	if err := d.pinEntry(d.ctx, rec.jobID, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		d.log.Warn("unpin job of lost spawn", "job", rec.jobID, "err", err)
	}
	d.mu.Lock()
	delete(d.reasons, rec.jobID)
	d.mu.Unlock()
}

// AgentExited is the scaler's process-exit callback: an agent it spawned has
// exited (err from wait). A spawn that never registered is forgotten and its
// job routed again; in any case the freed capacity triggers a re-drive.
// A registered agent's socket closing runs the usual disconnect triage.
func (d *Dispatcher) AgentExited(agentID string, err error) {
	d.log.Info("spawned agent exited", "agent", agentID, "err", err)
	d.forgetSpawn(agentID)
	d.kickRedrive()
}

// sweepAckDeadlines requeues dispatched entries whose persisted ack deadline
// passed while no in-memory timer watched them (orchestrator restart).
func (d *Dispatcher) sweepAckDeadlines() {
	list, err := d.st.ListQueue(d.ctx, []string{store.QueueDispatched})
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range list {
		if e.AckDeadline == nil || e.AckDeadline.After(now) {
			continue
		}
		d.mu.Lock()
		_, tracked := d.jobs[e.ID]
		d.mu.Unlock()
		if tracked {
			continue
		}
		d.requeueOrFail(d.ctx, e.ID, e, "dispatch ack timeout", e.AgentID)
	}
}

func (d *Dispatcher) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}
