package dispatch

import (
	"context"

	"kici.dev/kici/internal/store"
)

// reasonDraining is the pending reason of a job held back by orchestrator
// drain mode (KiCI [0.9.1] isDraining predicate).
const reasonDraining = "draining"

// setDraining turns orchestrator drain mode on or off. While draining, new
// and requeued jobs stay queued with the pending reason "draining", agents
// are handed nothing, and the Spawner is not consulted; jobs already on
// agents run to the end. Turning it off re-drives the queue at once.
func (q *jobQueue) setDraining(on bool) {
	q.mu.Lock()
	changed := q.drainMode != on
	q.drainMode = on
	q.mu.Unlock()
	if changed && !on {
		go q.redrive()
	}
}

// draining reports whether drain mode is on.
func (q *jobQueue) draining() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.drainMode
}

// abort is AbortJob past the cancel frame: it stops an agent spawned for
// jobID that has not registered yet, frees the slot of its agent, and
// fails the queue entry when pending or dispatched. It reports whether the
// queue entry changed.
func (q *jobQueue) abort(ctx context.Context, jobID string) bool {
	q.stopSpawnFor(jobID)
	freed := q.reg.abortTracked(jobID)
	q.forgetReason(jobID)
	q.pending.remove(jobID)
	changed, err := q.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed)
	if err != nil {
		q.log.Error("fail queue entry", "job", jobID, "err", err)
	}
	if freed {
		q.kickRedrive()
	}
	return changed
}

// expireQueued moves a pending queue entry to expired (queue timeout, run
// cancelled), stops an agent spawned for it that has not registered yet and
// forgets its pending reason; it reports whether it changed.
func (q *jobQueue) expireQueued(ctx context.Context, jobID string) (bool, error) {
	changed, err := q.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueExpired)
	if err == nil {
		q.pending.remove(jobID)
	}
	q.stopSpawnFor(jobID)
	q.forgetReason(jobID)
	return changed, err
}
