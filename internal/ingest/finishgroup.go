package ingest

import (
	"context"
	"encoding/json"
	"sync"

	"kici.dev/kici/internal/store"
)

// deliveryFinisher is the part of the store a finishGroup writes through.
type deliveryFinisher interface {
	FinishDeliveryWithRuns(ctx context.Context, id string, status store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error
	FinishDeliveries(ctx context.Context, fs []store.DeliveryFinish) error
}

// maxFinishGroup bounds the deliveries one commit finishes, so that a
// transaction (and, on PostgreSQL, a pipeline) stays short.
const maxFinishGroup = 32

// finishGroup gives the deliveries that workers finish at the same moment
// one transaction (group commit). A delivery's finish is a write
// transaction of its own: on SQLite every commit takes the one writer and
// writes its pages to the WAL, on PostgreSQL it is a pipeline of round
// trips and a commit. While one commit is in flight, the finishes that
// arrive wait; when it ends, the first of them commits all that waited, in
// one store.FinishDeliveries call. A finish that arrives alone is written
// at once, as before, so nothing waits when there is nothing to group.
//
// A group is all or nothing in the store. When it fails (a delivery in it
// was finished by another node, a write error), each of its deliveries is
// finished again on its own, which gives every one its own answer; the
// failed group wrote nothing, so nothing is written twice.
type finishGroup struct {
	st deliveryFinisher

	mu      sync.Mutex
	waiting []*finishing // queued behind the commit in flight
	busy    bool         // a commit is in flight; false implies waiting is empty
}

// finishing is one delivery's finish waiting for its group's commit.
type finishing struct {
	f    store.DeliveryFinish
	err  error
	done chan struct{} // closed once err is set
	lead chan struct{} // closed when this finish is to commit the waiting ones
}

// finish writes f, alone or with the finishes waiting beside it, and
// returns f's own outcome (FinishDeliveryWithRuns' errors). The write is
// not cancelled with ctx: a finish that started is completed.
func (g *finishGroup) finish(ctx context.Context, f store.DeliveryFinish) error {
	w := &finishing{f: f, done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	if g.busy {
		g.mu.Unlock()
		select {
		case <-w.done:
			return w.err
		case <-w.lead:
		}
	} else {
		g.busy = true
		g.mu.Unlock()
	}
	g.commitWaiting(context.WithoutCancel(ctx))
	<-w.done
	return w.err
}

// commitWaiting commits the finishes waiting (the caller's first among
// them), then hands the lead to the first finish that queued meanwhile.
func (g *finishGroup) commitWaiting(ctx context.Context) {
	g.mu.Lock()
	n := min(len(g.waiting), maxFinishGroup)
	group := g.waiting[:n:n]
	g.waiting = g.waiting[n:]
	g.mu.Unlock()

	g.commit(ctx, group)
	for _, w := range group {
		close(w.done)
	}

	g.mu.Lock()
	if len(g.waiting) > 0 {
		close(g.waiting[0].lead)
	} else {
		g.busy = false
		g.waiting = nil
	}
	g.mu.Unlock()
}

// commit writes group in one transaction, or each of its finishes on its
// own when there is one or the group failed.
func (g *finishGroup) commit(ctx context.Context, group []*finishing) {
	if len(group) > 1 {
		fs := make([]store.DeliveryFinish, len(group))
		for i, w := range group {
			fs[i] = w.f
		}
		if g.st.FinishDeliveries(ctx, fs) == nil {
			return
		}
	}
	for _, w := range group {
		f := w.f
		w.err = g.st.FinishDeliveryWithRuns(ctx, f.ID, f.Status, f.Error, f.Decisions, f.Outcome, f.Runs)
	}
}
