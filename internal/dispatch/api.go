package dispatch

// The Dispatcher's API: each method hands the call to the component that
// owns the state it concerns.

import (
	"context"
	"net/http"

	"kici.dev/kici/internal/store"
)

// ServeHTTP upgrades GET /ws to the agent channel and runs the connection:
// handshake (auth.request within AuthTimeout, agent.register within
// RegisterTimeout), then the registered message loop, then disconnect
// triage.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, req *http.Request) { d.reg.serve(w, req) }

// EnqueueJob puts a ready job (status queued) in the dispatch queue and
// routes it at once: to an idle matching agent, else to a spawned agent,
// else it waits with a pending reason. Exclude labels are read from the
// job's lock config (exact matchers). An entry that already exists for the
// job is routed again rather than duplicated. Errors are store failures
// while enqueueing; routing problems only leave the job waiting.
func (d *Dispatcher) EnqueueJob(ctx context.Context, job *store.Job) error {
	return d.queue.enqueue(ctx, job)
}

// AgentExited is the scaler's process-exit callback: an agent it spawned has
// exited (err from wait). A spawn that never registered is forgotten and its
// job routed again; in any case the freed capacity triggers a re-drive.
// A registered agent's socket closing runs the usual disconnect triage.
func (d *Dispatcher) AgentExited(agentID string, err error) { d.queue.agentExited(agentID, err) }

// KickToken closes every open agent socket that authenticated with agent
// token tokenID: auth.failure {reason:"Token revoked"} then close 4010, so
// the agent stops reconnecting. Call it after the revocation is stored. It
// returns how many sockets were closed.
func (d *Dispatcher) KickToken(tokenID string) int {
	return d.reg.kickToken(tokenID, ReasonTokenRevoked)
}

// SetDraining turns orchestrator drain mode on or off. While draining, new
// and requeued jobs stay queued with the pending reason "draining", agents
// are handed nothing, and the Spawner is not consulted; jobs already on
// agents run to the end. Turning it off re-drives the queue at once.
func (d *Dispatcher) SetDraining(on bool) { d.queue.setDraining(on) }

// Draining reports whether drain mode is on.
func (d *Dispatcher) Draining() bool { return d.queue.draining() }

// JobsRunning is the number of jobs handed to agents and not finished
// (dispatched, running or being cancelled).
func (d *Dispatcher) JobsRunning() int { return d.reg.jobsRunning() }

// AgentConnected reports whether agentID has a registered socket.
func (d *Dispatcher) AgentConnected(agentID string) bool { return d.reg.hasAgent(agentID) }

// Agents returns the registered agents, sorted by id.
func (d *Dispatcher) Agents() []AgentInfo { return d.reg.list() }

// AgentCount returns the number of registered agents (cheaper than
// len(Agents()), for metrics).
func (d *Dispatcher) AgentCount() int { return d.reg.count() }

// CancelJob sends job.cancel {reason, force} to the agent that owns jobID,
// connected to this node or, in a cluster, to another (asked through Peers,
// with a bounded wait for its answer). It reports whether a node wrote the
// frame: false when the job is on no connected agent (the caller then ends
// the job itself).
func (d *Dispatcher) CancelJob(jobID, reason string, force bool) bool {
	if d.reg.cancelHere(jobID, reason, force) {
		return true
	}
	return d.peers != nil && d.peers.CancelJob(jobID, reason, force, true)
}

// CancelJobHere is CancelJob for an agent connected to this node only (a
// cancel another node asked for).
func (d *Dispatcher) CancelJobHere(jobID, reason string, force bool) bool {
	return d.reg.cancelHere(jobID, reason, force)
}

// AbortJob ends the dispatcher's part in a job the orchestrator itself
// terminated (deadline, stale heartbeat, cancel without an agent): a forced
// job.cancel goes to its agent when one is connected, an agent spawned for
// it that has not registered yet is stopped, the agent's slot is
// freed, and the queue entry leaves pending/dispatched as failed. Later
// statuses from the agent are accepted and change nothing. It reports
// whether the queue entry changed.
func (d *Dispatcher) AbortJob(ctx context.Context, jobID, reason string) bool {
	if !d.reg.cancelHere(jobID, reason, true) && d.peers != nil {
		d.peers.CancelJob(jobID, reason, true, false) // the job ends here anyway: no wait
	}
	return d.queue.abort(ctx, jobID)
}

// ExpireQueued moves a pending queue entry to expired (queue timeout, run
// cancelled), stops an agent spawned for it that has not registered yet and
// forgets its pending reason; it reports whether it changed.
func (d *Dispatcher) ExpireQueued(ctx context.Context, jobID string) (bool, error) {
	return d.queue.expireQueued(ctx, jobID)
}

// WakeForJob is called when another node enqueued jobID: if it is still
// pending and an idle agent connected here fits it, this node dispatches
// it at once instead of at its next queue resync. Spawning agents stays
// the enqueuing node's business (it asked its spawner already). It reports
// whether this node dispatched the job.
func (d *Dispatcher) WakeForJob(ctx context.Context, jobID string) bool {
	return d.queue.wakeFor(ctx, jobID)
}

// SetPendingReason records reason as job jobID's pending reason while the
// job is still queued (a scaler backend explaining why its agent's spawn
// waits, e.g. an unschedulable pod); for a job no longer pending it does
// nothing.
func (d *Dispatcher) SetPendingReason(jobID, reason string) {
	d.queue.setReason(jobID, reason)
}
