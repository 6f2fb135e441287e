package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"kici.dev/kici/internal/store"
)

// recordingFinisher records how finishes reach the store.
type recordingFinisher struct {
	single   []string   // ids finished alone, in order
	groups   [][]string // ids of each FinishDeliveries call
	groupErr error      // FinishDeliveries' answer
	errs     map[string]error
}

func (r *recordingFinisher) FinishDeliveryWithRuns(_ context.Context, id string, _ store.DeliveryStatus, _ string, _ json.RawMessage, _ store.EventOutcome, _ []store.NewRun) error {
	r.single = append(r.single, id)
	return r.errs[id]
}

func (r *recordingFinisher) FinishDeliveries(_ context.Context, fs []store.DeliveryFinish) error {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	r.groups = append(r.groups, ids)
	return r.groupErr
}

func finishes(ids ...string) []store.DeliveryFinish {
	var fs []store.DeliveryFinish
	for _, id := range ids {
		fs = append(fs, store.DeliveryFinish{ID: id, Status: store.DeliveryProcessed})
	}
	return fs
}

// A group of finishes is one FinishDeliveries call; a lone finish is the
// single-delivery call, as before grouping.
func TestFinishGroupWritesTogether(t *testing.T) {
	rec := &recordingFinisher{}
	write := newFinishGroup(rec).Write
	if errs := write(t.Context(), finishes("a", "b", "c")); len(errs) != 3 || errors.Join(errs...) != nil {
		t.Fatalf("answers: %v", errs)
	}
	if len(rec.groups) != 1 || len(rec.groups[0]) != 3 || len(rec.single) != 0 {
		t.Fatalf("groups %v, alone %v: want one group of 3", rec.groups, rec.single)
	}
	if errs := write(t.Context(), finishes("d")); errs[0] != nil || len(rec.single) != 1 || len(rec.groups) != 1 {
		t.Fatalf("a lone finish: %v, groups %v, alone %v", errs, rec.groups, rec.single)
	}
}

// A group the store refuses (one of its deliveries was finished by another
// node) is finished again one by one, so each caller gets its own answer.
func TestARefusedGroupIsFinishedOneByOne(t *testing.T) {
	rec := &recordingFinisher{groupErr: store.ErrConflict, errs: map[string]error{"b": store.ErrConflict}}
	errs := newFinishGroup(rec).Write(t.Context(), finishes("a", "b", "c"))
	if errs[0] != nil || !errors.Is(errs[1], store.ErrConflict) || errs[2] != nil {
		t.Fatalf("answers: %v, want only b's conflict", errs)
	}
	if len(rec.groups) != 1 || len(rec.single) != 3 {
		t.Errorf("groups %v, alone %v: want one refused group, then each alone", rec.groups, rec.single)
	}
}
