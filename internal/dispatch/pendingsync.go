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
func (d *Dispatcher) claimEntry(ctx context.Context, id, agentID string, deadline time.Time) (*store.QueueEntry, error) {
	claimed, err := d.st.ClaimByID(ctx, id, agentID, deadline)
	if err != nil {
		return nil, err
	}
	d.pending.remove(id)
	return claimed, nil
}

// pinEntry pins pending entry id to agentID ("" unpins) in the store and
// in the index; an entry the store no longer has pending leaves the index.
func (d *Dispatcher) pinEntry(ctx context.Context, id, agentID string) error {
	err := d.st.PinQueueEntry(ctx, id, agentID)
	switch {
	case err == nil:
		d.pending.pin(id, agentID)
	case errors.Is(err, store.ErrNotFound):
		d.pending.remove(id)
	}
	return err
}

// loadPending merges the store's pending queue into the index: at Start
// (the index is rebuilt from the store, so a restarted orchestrator routes
// what its predecessor left queued) and every resyncInterval (entries
// another node enqueued, or that this node lost track of). The read is
// made without any dispatcher lock held.
func (d *Dispatcher) loadPending(ctx context.Context) error {
	since := d.pending.mark()
	list, err := d.st.ListQueue(ctx, []string{store.QueuePending})
	if err != nil {
		return err
	}
	added, dropped := d.pending.resync(list, since)
	if added > 0 || dropped > 0 {
		d.log.Debug("pending index merged with the store", "added", added, "dropped", dropped, "pending", d.pending.len())
	}
	return nil
}
