package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// recordingFinisher records how finishes reach the store. A finish alone
// of the delivery named in block waits until gate is closed.
type recordingFinisher struct {
	mu       sync.Mutex
	single   []string   // ids finished alone, in order
	groups   [][]string // ids of each FinishDeliveries call
	block    string
	entered  chan struct{}
	gate     chan struct{}
	groupErr error            // FinishDeliveries' answer
	errs     map[string]error // FinishDeliveryWithRuns' answer per id
}

func (r *recordingFinisher) FinishDeliveryWithRuns(_ context.Context, id string, _ store.DeliveryStatus, _ string, _ json.RawMessage, _ store.EventOutcome, _ []store.NewRun) error {
	if id == r.block {
		close(r.entered)
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.single = append(r.single, id)
	return r.errs[id]
}

func (r *recordingFinisher) FinishDeliveries(_ context.Context, fs []store.DeliveryFinish) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	r.groups = append(r.groups, ids)
	return r.groupErr
}

// finishBehindBlocked finishes "first" (held by rec's gate) and then n more
// deliveries while it is held, waits until all n are queued, opens the gate
// and returns each delivery's answer by id.
func finishBehindBlocked(t *testing.T, rec *recordingFinisher, n int) map[string]error {
	t.Helper()
	rec.block, rec.entered, rec.gate = "first", make(chan struct{}), make(chan struct{})
	g := &finishGroup{st: rec}
	var mu sync.Mutex
	answers := map[string]error{}
	var wg sync.WaitGroup
	start := func(id string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.finish(t.Context(), store.DeliveryFinish{ID: id, Status: store.DeliveryProcessed})
			mu.Lock()
			answers[id] = err
			mu.Unlock()
		}()
	}
	start("first")
	<-rec.entered
	for i := range n {
		start(fmt.Sprintf("d%02d", i))
	}
	wait.For(t, 10*time.Second, "every finish queued behind the one in flight", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.waiting) == n
	})
	close(rec.gate)
	wg.Wait()
	if len(answers) != n+1 {
		t.Fatalf("answers: %d, want %d", len(answers), n+1)
	}
	return answers
}

// Finishes that arrive while one is being written share the next commit:
// a lone finish is written as before, the 40 queued behind it go in two
// groups (of at most maxFinishGroup), and every caller is answered.
func TestFinishesArrivingTogetherShareOneCommit(t *testing.T) {
	rec := &recordingFinisher{}
	answers := finishBehindBlocked(t, rec, 40)
	for id, err := range answers {
		if err != nil {
			t.Errorf("finish of %s: %v", id, err)
		}
	}
	if len(rec.single) != 1 || rec.single[0] != "first" {
		t.Errorf("finished alone: %v, want only the first", rec.single)
	}
	if len(rec.groups) != 2 || len(rec.groups[0]) != maxFinishGroup || len(rec.groups[1]) != 40-maxFinishGroup {
		t.Fatalf("groups: %d %v, want two of %d and %d", len(rec.groups), rec.groups, maxFinishGroup, 40-maxFinishGroup)
	}
	seen := map[string]bool{}
	for _, grp := range rec.groups {
		for _, id := range grp {
			if seen[id] {
				t.Errorf("%s written twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 40 {
		t.Errorf("grouped deliveries: %d, want 40", len(seen))
	}
	// Nothing is left queued or in flight: a later finish is written at
	// once, alone.
	g := &finishGroup{st: rec}
	if err := g.finish(t.Context(), store.DeliveryFinish{ID: "later"}); err != nil || rec.single[len(rec.single)-1] != "later" {
		t.Errorf("a finish after the burst: %v, finished alone %v", err, rec.single)
	}
}

// A group the store refuses (one of its deliveries was finished by another
// node) is finished again one by one, so each caller gets its own answer.
func TestARefusedGroupIsFinishedOneByOne(t *testing.T) {
	rec := &recordingFinisher{groupErr: store.ErrConflict, errs: map[string]error{"d01": store.ErrConflict}}
	answers := finishBehindBlocked(t, rec, 3)
	for id, err := range answers {
		want := error(nil)
		if id == "d01" {
			want = store.ErrConflict
		}
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("finish of %s: %v, want %v", id, err, want)
		}
	}
	if len(rec.groups) != 1 || len(rec.groups[0]) != 3 {
		t.Fatalf("groups tried: %v, want one of 3", rec.groups)
	}
	if len(rec.single) != 4 {
		t.Errorf("finished alone: %v, want the first and the 3 of the refused group", rec.single)
	}
}
