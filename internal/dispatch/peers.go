package dispatch

import (
	"context"

	"kici.dev/kici/internal/store"
)

// Peers reaches the other orchestrators of a cluster on one database
// (internal/clusterbus, wired by the orchestrator). Ownership of a job
// lives in the database (the job row's agent), so any node accepts frames
// for any job; what only the node holding an agent's socket can do is
// write to that socket.
type Peers interface {
	// CancelJob asks the node holding the socket of jobID's agent to send
	// job.cancel {reason, force}. With wait it waits (bounded) for that
	// node's answer and reports whether a node sent the frame; without, it
	// only asks and returns false.
	CancelJob(jobID, reason string, force, wait bool) bool
	// Alone reports whether this node's last heartbeat found no other
	// live node on the database: nothing but this node enqueues there.
	Alone() bool
}

// wakeFor is WakeForJob: called when another node enqueued jobID: if it is still
// pending and an idle agent connected here fits it, this node dispatches
// it at once instead of at its next queue resync. Spawning agents stays
// the enqueuing node's business (it asked its spawner already). It reports
// whether this node dispatched the job.
func (q *jobQueue) wakeFor(ctx context.Context, jobID string) bool {
	if q.reg.isClosed() || q.draining() {
		return false
	}
	e, err := q.queueEntry(ctx, jobID, store.QueuePending)
	if err != nil || e == nil {
		return false // claimed already, or gone
	}
	// The entry is not put in this node's pending index: unless an idle
	// agent here takes it now, it stays the enqueuing node's to route (or
	// spawn for) until the next resync, so two nodes do not spawn for it.
	q.routeMu.Lock()
	if cur, ok := q.pending.get(jobID); ok {
		// Indexed here (this node's own NOTIFY comes back to it): a routing
		// decision may have bound it to a spawned agent since the read, and
		// handing it to another idle agent would leave that one jobless.
		e = cur
	}
	var out *outgoing
	if e.PinnedAgentID == "" || q.reg.hasAgent(e.PinnedAgentID) {
		// (Else it is bound to an agent of another node, or one not
		// registered yet.)
		out, _ = q.toIdleLocked(ctx, e, "")
	}
	q.routeMu.Unlock()
	if out == nil {
		return false
	}
	q.send(out)
	q.log.Info("job dispatched on a wake-up from another node", "job", jobID, "agent", out.a.id)
	return true
}
