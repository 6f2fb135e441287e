package dispatch

import (
	"context"
	"errors"
	"time"

	"kici.dev/kici/internal/store"
)

// claimEntry claims pending entry id for agentID through the store's
// atomic ClaimByID and keeps the pending index in step: the entry leaves
// the index when claimed and also when the store no longer has it pending
// (another claimant, another node, a cancel). (nil, nil) when it was not
// pending; an error leaves the index as it was.
func (q *jobQueue) claimEntry(ctx context.Context, id, agentID string, deadline time.Time) (*store.QueueEntry, error) {
	claimed, err := q.st.ClaimByID(ctx, id, agentID, deadline)
	if err != nil {
		return nil, err
	}
	q.pending.remove(id)
	return claimed, nil
}

// pinEntry pins pending entry id to agentID ("" unpins) in the store and
// in the index; an entry the store no longer has pending leaves the index.
func (q *jobQueue) pinEntry(ctx context.Context, id, agentID string) error {
	err := q.st.PinQueueEntry(ctx, id, agentID)
	switch {
	case err == nil:
		q.pending.pin(id, agentID)
	case errors.Is(err, store.ErrNotFound):
		q.pending.remove(id)
	}
	return err
}

// loadPending merges the store's pending queue into the index: at Start
// (the index is rebuilt from the store, so a restarted orchestrator routes
// what its predecessor left queued) and every resyncInterval (entries
// another node enqueued, or that this node lost track of). The read is
// made without any dispatcher lock held.
func (q *jobQueue) loadPending(ctx context.Context) error {
	since := q.pending.mark()
	list, err := q.st.ListQueue(ctx, []string{store.QueuePending})
	if err != nil {
		return err
	}
	added, dropped := q.pending.resync(list, since)
	if added > 0 || dropped > 0 {
		q.log.Debug("pending index merged with the store", "added", added, "dropped", dropped, "pending", q.pending.len())
	}
	return nil
}
