package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/runs"
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

// lostAnswer writes a finish, then answers the first one with answer: a
// COMMIT that landed but whose reply the connection lost (answer is the
// network error), or a group that landed so and was then retried delivery
// by delivery (answer is the retry's ErrConflict).
type lostAnswer struct {
	store.Store
	answer error
	lost   atomic.Bool
}

// FinishDeliveryWithRuns writes the finish, then answers the first one
// with l.answer.
func (l *lostAnswer) FinishDeliveryWithRuns(ctx context.Context, id string, st store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error {
	if err := l.Store.FinishDeliveryWithRuns(ctx, id, st, errText, decisions, o, runs); err != nil {
		return err
	}
	if l.lost.CompareAndSwap(false, true) {
		return l.answer
	}
	return nil
}

// A finish stored although it answered an error still releases its runs:
// their first jobs are queued at once, not left pending until the next
// start's recovery. Another node's finish (its runs, not this node's)
// still leaves the delivery alone.
func TestAFinishStoredDespiteItsAnswerReleasesItsRuns(t *testing.T) {
	for _, answer := range []error{errors.New("read tcp 127.0.0.1:5432: connection reset by peer"), store.ErrConflict} {
		h := newHarness(t)
		h.repo.Write(lockfile.Path, testLock)
		c1 := h.repo.Commit("initial")
		la := &lostAnswer{Store: h.st, answer: answer}
		h.proc = NewProcessor(la, runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
		d, tr := h.process(h.deliver("refs/heads/main", local.ZeroSHA, c1))
		if !la.lost.Load() || d.Status != store.DeliveryProcessed || len(tr.Runs) != 1 {
			t.Fatalf("answer %v: delivery %s with %d runs (answer lost: %v)", answer, d.Status, len(tr.Runs), la.lost.Load())
		}
		h.enq.mu.Lock()
		queued := slices.Clone(h.enq.calls)
		h.enq.mu.Unlock()
		if !slices.Equal(queued, []string{"build"}) {
			t.Errorf("answer %v: queued %v, want the run's first job, build", answer, queued)
		}
	}

	// Another node finished it first: this node's runs are not stored,
	// and nothing is queued.
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	h.proc = NewProcessor(&finishedElsewhere{Store: h.st}, runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	d, tr := h.process(h.deliver("refs/heads/main", local.ZeroSHA, c1))
	h.enq.mu.Lock()
	defer h.enq.mu.Unlock()
	if d.Status != store.DeliveryProcessed || len(tr.Runs) != 0 || len(h.enq.calls) != 0 {
		t.Errorf("delivery another node finished: %s, %d runs, queued %v; want the other node's outcome and nothing queued", d.Status, len(tr.Runs), h.enq.calls)
	}
}

// finishedElsewhere finishes each delivery as another node would, without
// runs, just before this node's finish reaches the store.
type finishedElsewhere struct{ store.Store }

// FinishDeliveryWithRuns finishes the delivery as another node, then
// tries this node's finish, which the store refuses.
func (f *finishedElsewhere) FinishDeliveryWithRuns(ctx context.Context, id string, st store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error {
	if err := f.Store.FinishDeliveryWithRuns(ctx, id, store.DeliveryProcessed, "", json.RawMessage(`{"summary":"elsewhere"}`), store.EventOutcome{}, nil); err != nil {
		return err
	}
	return f.Store.FinishDeliveryWithRuns(ctx, id, st, errText, decisions, o, runs)
}
