package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
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

// enqueue puts a ready job (status queued) in the dispatch queue and
// routes it at once: to an idle matching agent, else to a spawned agent,
// else it waits with a pending reason. Exclude labels are read from the
// job's lock config (exact matchers). An entry that already exists for the
// job is routed again rather than duplicated. Errors are store failures
// while enqueueing; routing problems only leave the job waiting.
func (q *jobQueue) enqueue(ctx context.Context, job *store.Job) error {
	e := entryFor(job)
	err := q.st.Enqueue(ctx, e)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("dispatch: enqueue job %s: %w", job.ID, err)
	}
	return q.queued(ctx, e, err == nil)
}

// entryFor is the queue entry a released job is queued under: pending,
// created now, with the job's labels and its lock config's exclude labels.
func entryFor(job *store.Job) *store.QueueEntry {
	return &store.QueueEntry{
		ID:            job.ID,
		RunID:         job.RunID,
		JobName:       job.JobName,
		RunsOnLabels:  append([]string{}, job.RunsOnLabels...),
		ExcludeLabels: excludeLabels(job.Config),
		Status:        store.QueuePending,
		CreatedAt:     time.Now().UTC(),
	}
}

// queued routes entry e once it is in the store: e itself when it was
// stored, else (an entry for the job existed) the entry the store has,
// if it is still pending.
func (q *jobQueue) queued(ctx context.Context, e *store.QueueEntry, stored bool) error {
	if !stored {
		existing, err := q.queueEntry(ctx, e.ID, store.QueuePending)
		if err != nil || existing == nil {
			return err
		}
		e = existing
	}
	q.pending.put(e)
	q.route(ctx, e, "")
	return nil
}

// excludeLabels extracts the exact exclude matchers of a lock job config,
// plus protocol.LabelWarmPod for a job with `container:` or `services:`:
// a warm pod of a kubernetes scaler cannot run it (its pod must be made
// for the job's image and services).
func excludeLabels(config json.RawMessage) []string {
	if len(config) == 0 {
		return nil
	}
	var cfg struct {
		ExcludeLabels []struct {
			Kind  lockfile.MatcherKind `json:"kind"`
			Value string               `json:"value"`
		} `json:"excludeLabels"`
		Container json.RawMessage   `json:"container"`
		Services  []json.RawMessage `json:"services"`
	}
	if json.Unmarshal(config, &cfg) != nil {
		return nil
	}
	var out []string
	for _, m := range cfg.ExcludeLabels {
		if m.Kind == lockfile.MatcherExact && m.Value != "" {
			out = append(out, m.Value)
		}
	}
	if (len(cfg.Container) > 0 && string(cfg.Container) != "null") || len(cfg.Services) > 0 {
		out = append(out, protocol.LabelWarmPod)
	}
	return out
}

// queueEntry finds one queue entry by id among entries in statuses: from
// the pending index when it holds it and pending is asked for, else from
// the store (one read by id: a job enqueued twice, e.g. by recovery, or
// another node's job it wakes this one for). nil when it is not there or
// in another status.
func (q *jobQueue) queueEntry(ctx context.Context, id string, statuses ...string) (*store.QueueEntry, error) {
	if len(statuses) == 1 && statuses[0] == store.QueuePending {
		if e, ok := q.pending.get(id); ok {
			return e, nil
		}
	}
	e, err := q.st.GetQueueEntry(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(statuses) > 0 && !slices.Contains(statuses, e.Status) {
		return nil, nil
	}
	return e, nil
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

// setReason writes a queued job's pending reason, behind routing
// (reasonWriter), when it changed and the job still waits in the queue
// (routing sets it after releasing routeMu, by which time the job may
// have been dispatched).
func (q *jobQueue) setReason(jobID, reason string) {
	if !q.pending.has(jobID) {
		return
	}
	q.mu.Lock()
	if prev, ok := q.reasons[jobID]; ok && prev == reason {
		q.mu.Unlock()
		return
	}
	q.reasons[jobID] = reason
	q.mu.Unlock()
	q.reasonW.put(jobID, reason)
}

// drain hands pending entries to agent a while it has free slots: first the
// entry pinned to it (its bound job), then the oldest entry its labels fit.
func (q *jobQueue) drain(ctx context.Context, a *agentConn) {
	for {
		q.routeMu.Lock()
		out, more := q.drainOne(ctx, a)
		q.routeMu.Unlock()
		q.send(out)
		if !more {
			return
		}
	}
}

func (q *jobQueue) drainOne(ctx context.Context, a *agentConn) (*outgoing, bool) {
	if q.draining() {
		return nil, false
	}
	if !q.reg.reserve(a) {
		return nil, false
	}
	deadline := time.Now().Add(q.ackTimeout(ctx)).UTC()
	var e *store.QueueEntry
	var err error
	if bound := q.boundJob(ctx, a); bound != "" {
		e, err = q.claimEntry(ctx, bound, a.id, deadline)
	}
	if e == nil && err == nil {
		e, err = q.claimNext(ctx, a, deadline)
	}
	if err != nil || e == nil {
		q.reg.release(a)
		if err != nil {
			q.log.Error("drain queue", "agent", a.id, "err", err)
		}
		return nil, false
	}
	return q.prepare(ctx, a, e), true
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
func (q *jobQueue) prepare(ctx context.Context, a *agentConn, e *store.QueueEntry) *outgoing {
	msg, stored, terminal, err := q.buildDispatch(ctx, a, e)
	if err != nil || terminal {
		q.reg.release(a)
		if terminal {
			// The job ended while queued (e.g. cancelled): drop the entry.
			_, _ = q.st.SetQueueStatus(ctx, e.ID, []string{store.QueueDispatched}, store.QueueExpired)
			return nil
		}
		q.log.Error("build job.dispatch", "job", e.ID, "err", err)
		n, ok, rerr := q.st.RequeueEntry(ctx, e.ID)
		if rerr != nil || !ok {
			q.log.Error("requeue after build failure", "job", e.ID, "err", rerr)
			return nil
		}
		back := *e
		back.Status, back.AgentID, back.Attempts, back.AckDeadline = store.QueuePending, "", n, nil
		q.pending.put(&back)
		return nil
	}
	js := &jobState{entry: *e, agentID: a.id, session: a.resume, holdsSlot: true, lastSeq: -1}
	ackIn := q.ackWait(ctx, e)
	q.reg.track(a, js, ackIn)
	// The reason is cleared only when there is one: the job as just read
	// had one (written by any node), or this node wrote one (perhaps
	// after that read). A job routed straight to an idle agent, most
	// of them, costs no write. The clear goes behind any reason of the
	// job still being written, never on the routing path.
	if wrote := q.forgetReason(e.ID); wrote || stored != "" {
		q.reasonW.put(e.ID, "")
	}
	return &outgoing{a: a, msg: msg}
}

// send writes a prepared dispatch. A failed write closes the socket; the
// disconnect triage then requeues the unstarted job.
func (q *jobQueue) send(out *outgoing) {
	if out == nil {
		return
	}
	if err := out.a.send(out.msg); err != nil {
		q.log.Warn("send job.dispatch failed; closing agent", "job", out.msg.JobID, "agent", out.a.id, "err", err)
		out.a.close(protocol.CloseInternalError, "send failed")
		return
	}
	q.log.Info("job dispatched", "job", out.msg.JobID, "agent", out.a.id)
}

// buildDispatch assembles job.dispatch from the job's rows (one pipelined
// read on PostgreSQL, store.DispatchRows), and returns the pending reason
// the job row held. terminal is true when the job no longer needs to run.
func (q *jobQueue) buildDispatch(ctx context.Context, a *agentConn, e *store.QueueEntry) (msg *protocol.JobDispatch, pendingReason string, terminal bool, err error) {
	rows, err := q.dispatchRows(ctx, e)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, "", true, nil
		}
		return nil, "", false, err
	}
	run, job := rows.Run, rows.Job
	if job.Status.IsTerminal() {
		return nil, "", true, nil
	}
	data, err := q.resolveJobData(ctx, run, job, a)
	if err != nil {
		return nil, "", false, err
	}
	msg = runs.NewJobDispatch(run, rows.Context, job, rows.Jobs, rows.Outputs)
	msg.Secrets, msg.ContextVars = data.Secrets, data.ContextVars
	msg.JobCredential = data.JobCredential
	msg.Untrusted = run.TrustTier == store.TrustUnknown
	return msg, job.PendingReason, false, nil
}

// dispatchRows reads the rows entry e's job.dispatch is built from, its
// run named by the entry. A job is not dropped on the entry's word: when
// the entry names no run, or a run the job is not part of, the job row
// decides (store.ErrNotFound only when the job or its run is gone).
func (q *jobQueue) dispatchRows(ctx context.Context, e *store.QueueEntry) (*store.DispatchRows, error) {
	if e.RunID != "" {
		rows, err := q.st.DispatchRows(ctx, e.RunID, e.ID)
		if !errors.Is(err, store.ErrNotFound) {
			return rows, err
		}
	}
	job, err := q.st.GetJob(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	if job.RunID == e.RunID {
		return nil, fmt.Errorf("%w: run %s of job %s", store.ErrNotFound, job.RunID, e.ID)
	}
	return q.st.DispatchRows(ctx, job.RunID, e.ID)
}

// requeueOrFail puts a dispatched entry back to pending with attempts+1 and
// routes it again (never to exclude); at MaxAttempts the entry and the job
// fail with "re-dispatch attempts exhausted after N attempts (why)".
func (q *jobQueue) requeueOrFail(ctx context.Context, jobID string, e *store.QueueEntry, why, exclude string) {
	n, ok, err := q.st.RequeueEntry(ctx, jobID)
	if err != nil {
		q.log.Error("requeue", "job", jobID, "err", err)
		return
	}
	if !ok {
		return
	}
	if n >= q.cfg.MaxAttempts {
		if _, err := q.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueFailed); err != nil {
			q.log.Error("fail queue entry", "job", jobID, "err", err)
		}
		q.mu.Lock()
		delete(q.reasons, jobID)
		q.mu.Unlock()
		msg := fmt.Sprintf("re-dispatch attempts exhausted after %d attempts (%s)", n, why)
		q.log.Warn("job failed", "job", jobID, "reason", msg)
		q.fr.finishJob(ctx, jobID, status.JobFailed, msg)
		return
	}
	re := *e
	re.Status = store.QueuePending
	re.AgentID = ""
	re.Attempts = n
	re.AckDeadline = nil
	q.pending.put(&re)
	if re.PinnedAgentID != "" {
		// The bound agent failed this job: any agent may take it now.
		if err := q.pinEntry(ctx, jobID, ""); err == nil {
			re.PinnedAgentID = ""
		}
	}
	q.route(ctx, &re, exclude)
}

// expireSpawns gives up on spawned agents that did not register in time:
// stops them and unpins their jobs for the re-drive.
func (q *jobQueue) expireSpawns() {
	now := time.Now()
	q.mu.Lock()
	var expired []string
	for id, rec := range q.spawns {
		if now.After(rec.deadline) {
			expired = append(expired, id)
		}
	}
	q.mu.Unlock()
	for _, id := range expired {
		q.log.Warn("spawned agent did not register in time", "agent", id)
		q.forgetSpawn(id)
		if q.spawner != nil {
			q.spawner.Stop(id)
		}
	}
}

// forgetSpawn drops a spawn record and unpins its job if still pending.
func (q *jobQueue) forgetSpawn(agentID string) {
	q.mu.Lock()
	rec, ok := q.spawns[agentID]
	delete(q.spawns, agentID)
	q.mu.Unlock()
	registered := q.reg.hasAgent(agentID)
	if !ok || registered {
		return
	}
	if err := q.pinEntry(q.ctx, rec.jobID, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		q.log.Warn("unpin job of lost spawn", "job", rec.jobID, "err", err)
	}
	q.mu.Lock()
	delete(q.reasons, rec.jobID)
	q.mu.Unlock()
}

// agentExited is the scaler's process-exit callback: an agent it spawned has
// exited (err from wait). A spawn that never registered is forgotten and its
// job routed again; in any case the freed capacity triggers a re-drive.
// A registered agent's socket closing runs the usual disconnect triage.
func (q *jobQueue) agentExited(agentID string, err error) {
	q.log.Info("spawned agent exited", "agent", agentID, "err", err)
	q.forgetSpawn(agentID)
	q.kickRedrive()
}

// sweepAckDeadlines requeues dispatched entries whose persisted ack deadline
// passed while no in-memory timer watched them (orchestrator restart).
func (q *jobQueue) sweepAckDeadlines() {
	list, err := q.st.ListQueue(q.ctx, []string{store.QueueDispatched})
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range list {
		if e.AckDeadline == nil || e.AckDeadline.After(now) {
			continue
		}
		if q.reg.tracks(e.ID) {
			continue
		}
		q.requeueOrFail(q.ctx, e.ID, e, "dispatch ack timeout", e.AgentID)
	}
}

// resolveJobData resolves the secrets and context variables of a job
// dispatched to agent a (none without a resolver).
func (q *jobQueue) resolveJobData(ctx context.Context, run *store.Run, job *store.Job, a *agentConn) (JobData, error) {
	f := q.secretResolver
	facts := q.reg.facts(a)
	if f == nil {
		return JobData{}, nil
	}
	return f(ctx, run, job, facts)
}
