package ingest

import (
	"context"
	"encoding/json"

	"kici.dev/kici/internal/groupcommit"
	"kici.dev/kici/internal/store"
)

// deliveryFinisher is the part of the store that deliveries are finished
// through.
type deliveryFinisher interface {
	FinishDeliveryWithRuns(ctx context.Context, id string, status store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error
	FinishDeliveries(ctx context.Context, fs []store.DeliveryFinish) error
}

// maxFinishGroup bounds the deliveries one commit finishes, so that a
// transaction (and, on PostgreSQL, a pipeline) stays short.
const maxFinishGroup = 32

// newFinishGroup gives the deliveries that workers finish at the same
// moment one transaction (package groupcommit). A delivery's finish is a
// write transaction of its own: on SQLite every commit takes the one
// writer and writes its pages to the WAL, on PostgreSQL it is a pipeline
// of two round trips and a commit; finishes that waited behind one are
// written together, in one store.FinishDeliveries call.
//
// A group is all or nothing in the store. When it fails (a delivery in it
// was finished by another node, a write error), each of its deliveries is
// finished again on its own, which gives every one its own answer; the
// failed group wrote nothing, so nothing is written twice. The write is
// not cancelled with the leading caller's context: a finish that started
// is completed.
func newFinishGroup(st deliveryFinisher) *groupcommit.Queue[store.DeliveryFinish] {
	return &groupcommit.Queue[store.DeliveryFinish]{Max: maxFinishGroup, Write: func(ctx context.Context, group []store.DeliveryFinish) []error {
		ctx = context.WithoutCancel(ctx)
		errs := make([]error, len(group))
		if len(group) > 1 && st.FinishDeliveries(ctx, group) == nil {
			return errs
		}
		for i, f := range group {
			errs[i] = st.FinishDeliveryWithRuns(ctx, f.ID, f.Status, f.Error, f.Decisions, f.Outcome, f.Runs)
		}
		return errs
	}}
}
