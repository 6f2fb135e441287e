package dispatch

// The queue and routing: the component that decides where pending jobs go.

import (
	"sync"
	"sync/atomic"
	"time"
)

// jobQueue owns the pending queue and its routing (queue.go, route.go,
// pending.go, pendingsync.go, spawnstop.go, control.go): the pending index,
// the pending reasons, the agents spawned for jobs and drain mode, and
// makes every routing decision. It reserves agent slots and tracks
// dispatched jobs through the registry.
type jobQueue struct {
	*core
	// spawner is asked for agents no connected one can replace; nil
	// without auto-scaling.
	spawner Spawner
	// secretResolver resolves declared secrets (kick.go); nil = none sent.
	secretResolver JobDataResolver

	reg *registry
	fr  *frameHandler

	// routeMu serialises routing decisions (reserve a slot, claim an entry,
	// track it). Without it a drain that briefly holds an agent's only slot
	// while finding nothing to claim would make a concurrent EnqueueJob see
	// the agent busy and spawn or wait needlessly. Frames are written after
	// it is released. It comes first in the lock order.
	routeMu sync.Mutex
	// registering counts registrations between register.ack and the end of
	// their first drain.
	registering atomic.Int64
	// pending indexes the pending queue by label set (pending.go); it has
	// its own lock, a leaf.
	pending *pendingIndex
	// kick asks the background loop for an early re-drive.
	kick chan struct{}

	mu      sync.Mutex
	reasons map[string]string    // last pending reason written per job
	reasonW *reasonWriter        // writes them behind routing
	spawns  map[string]*spawnRec // spawned, not yet registered agents
	// drainMode is orchestrator drain mode (control.go).
	drainMode bool
}

// spawnRec is an agent the Spawner started for a job and that has not
// registered yet.
type spawnRec struct {
	jobID    string
	deadline time.Time
}

// kickRedrive asks the loop for an early re-drive (debounced).
func (q *jobQueue) kickRedrive() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// forgetReason drops the pending reason last written for jobID (the job
// left the queue) and reports whether there was one.
func (q *jobQueue) forgetReason(jobID string) bool {
	q.mu.Lock()
	_, had := q.reasons[jobID]
	delete(q.reasons, jobID)
	q.mu.Unlock()
	return had
}

// spawned forgets the spawn record of agentID, which has registered.
func (q *jobQueue) spawned(agentID string) {
	q.mu.Lock()
	delete(q.spawns, agentID)
	q.mu.Unlock()
}
