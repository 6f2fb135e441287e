package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
)

// route sends a pending entry to an idle agent (never to exclude), else
// asks the spawner, else records why it waits. Routing decisions are
// serialised by routeMu (see jobQueue.routeMu); the frame is written
// after the lock is released. It reports whether the entry is still
// waiting for capacity that does not exist yet (no fitting idle agent and
// no agent spawned for it): the re-drive then skips the entries behind it
// that ask for the same labels.
func (q *jobQueue) route(ctx context.Context, e *store.QueueEntry, exclude string) (blocked bool) {
	if q.reg.isClosed() {
		return true
	}
	q.routeMu.Lock()
	out, blocked, reason := q.routeLocked(ctx, e, exclude)
	q.routeMu.Unlock()
	q.send(out)
	if reason != "" {
		// Set after routeMu is released, and written behind routing
		// (reasonWriter): no routing decision waits for the store.
		q.setReason(e.ID, reason)
	}
	return blocked
}

// routeLocked makes the routing decision for e; reason is the pending
// reason to record when e keeps waiting. Caller holds routeMu.
//
// The caller's e is a copy read before routeMu was taken, and another
// decision may have run in between (the enqueue path and a re-drive both
// route a fresh job): the entry may have been claimed since, or bound to
// an agent spawned for it. So the decision is made on the pending index's
// current entry, which every decision keeps in step under routeMu; acting
// on the stale copy spawned a second agent for one job.
func (q *jobQueue) routeLocked(ctx context.Context, e *store.QueueEntry, exclude string) (out *outgoing, blocked bool, reason string) {
	if q.draining() {
		return nil, true, reasonDraining
	}
	cur, ok := q.pending.get(e.ID)
	if !ok {
		return nil, false, "" // claimed, cancelled or expired meanwhile
	}
	e = cur
	if out, found := q.toIdleLocked(ctx, e, exclude); found {
		return out, false, ""
	}
	if e.PinnedAgentID != "" {
		// Bound to a spawned (or named) agent: only that agent takes it.
		return nil, false, ""
	}
	spawned, reason := q.consultSpawner(ctx, e)
	return nil, !spawned, reason
}

// toIdleLocked hands e to an idle agent that fits it, when one exists
// (found); out is nil when the entry was claimed elsewhere meanwhile.
// Caller holds routeMu.
func (q *jobQueue) toIdleLocked(ctx context.Context, e *store.QueueEntry, exclude string) (out *outgoing, found bool) {
	a := q.reg.reserveIdle(e, exclude)
	if a == nil {
		return nil, false
	}
	claimed, err := q.claimEntry(ctx, e.ID, a.id, time.Now().Add(q.ackTimeout(ctx)).UTC())
	if err != nil || claimed == nil {
		q.reg.release(a)
		if err != nil {
			q.log.Error("claim queue entry", "job", e.ID, "err", err)
		}
		return nil, true
	}
	return q.prepare(ctx, a, claimed), true
}

// consultSpawner asks the spawner for an agent bound to e and pins e to
// it. It reports whether an agent was spawned, and the pending reason e
// waits with.
func (q *jobQueue) consultSpawner(ctx context.Context, e *store.QueueEntry) (spawned bool, reason string) {
	if agentID, ok := q.spawnFor(e.ID); ok {
		// An agent is already on its way for e (its pin may not have
		// reached the index): a job has at most one spawn outstanding.
		return true, fmt.Sprintf(reasonSpawningFmt, agentID)
	}
	reason = q.reg.noAgentReason(e)
	var agentID string
	var err error
	tried := false
	if q.spawner != nil {
		agentID, err = q.spawner.SpawnFor(ctx, ScaleRequest{JobID: e.ID, RunID: e.RunID, RunsOn: e.RunsOnLabels, Exclude: e.ExcludeLabels})
		tried = !errors.Is(err, ErrNoBackend)
	}
	if tried {
		switch {
		case err == nil:
			spawned = true
			q.mu.Lock()
			q.spawns[agentID] = &spawnRec{jobID: e.ID, deadline: time.Now().Add(q.cfg.SpawnTimeout)}
			q.mu.Unlock()
			if err := q.pinEntry(ctx, e.ID, agentID); err != nil {
				q.log.Warn("pin queue entry to spawned agent", "job", e.ID, "agent", agentID, "err", err)
			}
			reason = fmt.Sprintf(reasonSpawningFmt, agentID)
			q.log.Info("spawned agent for job", "job", e.ID, "agent", agentID)
		case errors.Is(err, ErrAtCapacity):
			reason = err.Error()
		default:
			reason = "spawn failed: " + err.Error()
			q.log.Warn("spawn agent", "job", e.ID, "err", err)
		}
	}
	if !tried && reason != reasonAllBusy {
		// No connected agent has the labels and no scaler label set can
		// spawn one: say so, so the sweep can end it after the grace.
		reason = unroutableReason(e, reason)
	}
	return spawned, reason
}

// spawnFor returns the agent spawned for jobID that has not registered
// yet, if any.
func (q *jobQueue) spawnFor(jobID string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for agentID, rec := range q.spawns {
		if rec.jobID == jobID {
			return agentID, true
		}
	}
	return "", false
}

// boundJob returns the pending entry pinned to agentID, if any: the job it
// was spawned for, or for a single-use agent that this process did not
// spawn (an orchestrator restart) the oldest entry pinned to it in the
// pending index. A static agent's pinned entries are claimed by claimNext,
// which takes entries pinned to it first.
func (q *jobQueue) boundJob(ctx context.Context, a *agentConn) string {
	q.mu.Lock()
	rec, ok := q.spawns[a.id]
	q.mu.Unlock()
	singleUse := q.reg.singleUse(a)
	if ok {
		return rec.jobID
	}
	if !singleUse {
		return ""
	}
	if pinned := q.pending.pinnedTo(a.id); len(pinned) > 0 {
		return pinned[0].ID
	}
	return ""
}

// boundJobPending reports whether agent a registers with a job still
// waiting for it (register.ack pendingDispatch): its bound job is pending
// and pinned to it (or to no one: its pin did not reach the store). A job taken by another agent meanwhile (or cancelled)
// does not count, so the agent waits only KICI_SCALER_IDLE_TIMEOUT (5 s)
// for other work and exits, instead of KICI_SCALER_PENDING_DISPATCH_TIMEOUT
// (60 s) for a dispatch that will never come.
func (q *jobQueue) boundJobPending(ctx context.Context, a *agentConn) bool {
	bound := q.boundJob(ctx, a)
	if bound == "" {
		return false
	}
	e, ok := q.pending.get(bound)
	return ok && (e.PinnedAgentID == a.id || e.PinnedAgentID == "")
}

// routeKey names the routing class of an unpinned entry: entries with the
// same runsOn and exclude label sets get the same answer from every agent
// and from the spawner, so once one of them waits the younger ones do too.
func routeKey(e *store.QueueEntry) string {
	on := slices.Clone(e.RunsOnLabels)
	slices.Sort(on)
	ex := slices.Clone(e.ExcludeLabels)
	slices.Sort(ex)
	return strings.Join(on, "\x00") + "\x01" + strings.Join(ex, "\x00")
}

// redrive retries pending entries from the pending index: pinned ones
// whose agent is neither connected nor being spawned are unpinned first
// (they rejoin their label set); then, oldest first across label sets,
// entries go to idle agents or the spawner (capacity may have been freed).
//
// Its cost does not grow with parked work: it never lists the queue, and
// as soon as one entry of a label set is left waiting (no fitting idle
// agent, nothing spawned) the rest of that set is not routed again in
// this pass; each only has its pending reason brought in line with the
// oldest one's (a map lookup; a store write only when it changed, and at
// most maxReasonWrites writes per pass, so a reason that changes for
// thousands of parked jobs at once, e.g. when an agent comes online,
// converges over a few passes instead of stalling one; a set already in
// line is not walked at all). So one pass makes at most one failing
// routing decision per label set, however many jobs are parked behind
// it, and routeMu is held only for those decisions.
func (q *jobQueue) redrive() {
	ctx := q.ctx
	q.redrivePinned(ctx)
	writes := maxReasonWrites
	waiting := map[string]bool{} // route keys whose oldest entry waits
	last := map[string]string{}  // route key → the entry routed last
	for ctx.Err() == nil {
		key, e := q.pending.oldestHead(waiting)
		if e == nil {
			return
		}
		if last[key] == e.ID {
			// Routed without leaving the set (a store error): next pass.
			waiting[key] = true
			continue
		}
		last[key] = e.ID
		if q.route(ctx, e, "") {
			waiting[key] = true
			writes = q.alignReasons(ctx, key, e.ID, writes)
		}
	}
}

// redrivePinned unpins entries whose agent is neither connected nor being
// spawned, and routes those whose agent is connected.
func (q *jobQueue) redrivePinned(ctx context.Context) {
	for _, e := range q.pending.allPinned() {
		if ctx.Err() != nil {
			return
		}
		q.mu.Lock()
		_, spawning := q.spawns[e.PinnedAgentID]
		q.mu.Unlock()
		switch {
		case spawning:
		case !q.reg.hasAgent(e.PinnedAgentID):
			_ = q.pinEntry(ctx, e.ID, "")
		default:
			q.route(ctx, e, "")
		}
	}
}

// alignReasons gives the entries of label set key behind its waiting head
// the head's pending reason, spending at most writes store writes; it
// returns the writes left.
func (q *jobQueue) alignReasons(ctx context.Context, key, head string, writes int) int {
	q.mu.Lock()
	reason, ok := q.reasons[head]
	q.mu.Unlock()
	if !ok {
		return writes
	}
	complete := true
	for _, id := range q.pending.behindHead(key, reason) {
		if writes == 0 {
			complete = false
			break
		}
		if q.copyReason(ctx, id, head) {
			writes--
		}
	}
	if complete {
		q.pending.markSynced(key, reason)
	}
	return writes
}

// maxReasonWrites bounds the pending-reason writes one re-drive makes for
// jobs parked behind the oldest of their label set.
const maxReasonWrites = 64

// copyReason gives job the pending reason last written for job from and
// reports whether that took a store write.
func (q *jobQueue) copyReason(ctx context.Context, job, from string) bool {
	q.mu.Lock()
	reason, ok := q.reasons[from]
	prev, had := q.reasons[job]
	q.mu.Unlock()
	if !ok || had && prev == reason {
		return false
	}
	q.setReason(job, reason)
	return true
}

// claimNext claims the oldest pending entry agent a may run: an entry
// pinned to it first, else the oldest head among the label sets it fits
// (pendingIndex.next), so the cost does not grow with the jobs parked in
// sets it cannot serve. The claim itself is the store's atomic ClaimByID:
// an entry another claimant took meanwhile is dropped from the index and
// the next candidate tried.
func (q *jobQueue) claimNext(ctx context.Context, a *agentConn, deadline time.Time) (*store.QueueEntry, error) {
	labels, mandatory, tokenLabels := q.reg.routingLabels(a)
	fits := func(runsOn, exclude []string) bool { return agentFits(labels, mandatory, tokenLabels, runsOn, exclude) }
	for {
		e := q.pending.next(a.id, fits)
		if e == nil {
			return nil, nil
		}
		claimed, err := q.claimEntry(ctx, e.ID, a.id, deadline)
		if err != nil || claimed != nil {
			return claimed, err
		}
	}
}
