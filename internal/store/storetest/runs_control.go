package storetest

import (
	"context"
	"errors"
	"testing"

	"kici.dev/kici/internal/store"
)

// testRunControl covers RunControlStore: concurrency entries per group,
// oldest first, conditional status moves, duplicate runs refused; rerun
// links round-trip and need an existing run.
func testRunControl(t *testing.T, s store.Store) {
	ctx := context.Background()
	testRunLinks(t, s)
	mk := func(run, scope, group, status string, sec int) *store.ConcurrencyEntry {
		return &store.ConcurrencyEntry{RunID: run, Scope: scope, Group: group, Status: status, Max: 2, CancelInProgress: run == "r1", CreatedAt: at(sec)}
	}
	for _, e := range []*store.ConcurrencyEntry{
		mk("r2", "acme/app", "deploy-main", store.ConcurrencyQueued, 2),
		mk("r1", "acme/app", "deploy-main", store.ConcurrencyActive, 1),
		mk("r3", "acme/app", "deploy-dev", store.ConcurrencyActive, 3),
		mk("r4", "other/app", "deploy-main", store.ConcurrencyActive, 4),
	} {
		must(t, s.InsertConcurrencyEntry(ctx, e))
	}
	if err := s.InsertConcurrencyEntry(ctx, mk("r1", "x", "y", store.ConcurrencyActive, 5)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate run entry: %v, want ErrConflict", err)
	}
	got, err := s.GetConcurrencyEntry(ctx, "r1")
	must(t, err)
	if got.Scope != "acme/app" || got.Group != "deploy-main" || got.Status != "active" || got.Max != 2 || !got.CancelInProgress || !got.CreatedAt.Equal(at(1)) {
		t.Errorf("round trip: %+v", got)
	}
	if _, err := s.GetConcurrencyEntry(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	ids := func(list []*store.ConcurrencyEntry) []string {
		var out []string
		for _, e := range list {
			out = append(out, e.RunID)
		}
		return out
	}
	list, err := s.ListConcurrencyEntries(ctx, "acme/app", "deploy-main", nil)
	must(t, err)
	if g := ids(list); len(g) != 2 || g[0] != "r1" || g[1] != "r2" {
		t.Errorf("group entries = %v, want [r1 r2] oldest first", g)
	}
	list, err = s.ListConcurrencyEntries(ctx, "acme/app", "deploy-main", []string{store.ConcurrencyQueued})
	must(t, err)
	if g := ids(list); len(g) != 1 || g[0] != "r2" {
		t.Errorf("queued entries = %v", g)
	}
	list, err = s.ListConcurrencyEntries(ctx, "", "", []string{store.ConcurrencyActive})
	must(t, err)
	if g := ids(list); len(g) != 3 {
		t.Errorf("all active entries = %v", g)
	}
	ok, err := s.SetConcurrencyStatus(ctx, "r2", []string{store.ConcurrencyActive}, store.ConcurrencyCompleted)
	must(t, err)
	if ok {
		t.Error("moved an entry from a status it is not in")
	}
	ok, err = s.SetConcurrencyStatus(ctx, "r2", []string{store.ConcurrencyQueued}, store.ConcurrencyActive)
	must(t, err)
	if !ok {
		t.Error("queued → active did not change the entry")
	}
	if e, _ := s.GetConcurrencyEntry(ctx, "r2"); e.Status != store.ConcurrencyActive {
		t.Errorf("status after move = %s", e.Status)
	}
}

func testRunLinks(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateRun(ctx, fullRun("orig", at(0)), nil))
	must(t, s.CreateRun(ctx, fullRun("rerun", at(1)), nil))
	must(t, s.InsertRunLink(ctx, &store.RunLink{RunID: "rerun", ParentRunID: "orig", OriginalRunID: "orig", CreatedAt: at(1)}))
	l, err := s.GetRunLink(ctx, "rerun")
	must(t, err)
	if l.ParentRunID != "orig" || l.OriginalRunID != "orig" || !l.CreatedAt.Equal(at(1)) {
		t.Errorf("link = %+v", l)
	}
	if _, err := s.GetRunLink(ctx, "orig"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run without link: %v", err)
	}
	must(t, s.CreateRun(ctx, fullRun("rerun2", at(2)), nil))
	must(t, s.InsertRunLink(ctx, &store.RunLink{RunID: "rerun2", ParentRunID: "orig", OriginalRunID: "orig", CreatedAt: at(2)}))
	kids, err := s.ListRerunsOf(ctx, "orig", 0)
	must(t, err)
	if len(kids) != 2 || kids[0].RunID != "rerun" || kids[1].RunID != "rerun2" {
		t.Errorf("reruns of orig = %+v, want rerun then rerun2", kids)
	}
	if kids, err := s.ListRerunsOf(ctx, "rerun", 0); err != nil || len(kids) != 0 {
		t.Errorf("reruns of a run never rerun = %+v, %v", kids, err)
	}
	if err := s.InsertRunLink(ctx, &store.RunLink{RunID: "rerun", ParentRunID: "x", OriginalRunID: "x"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second link: %v, want ErrConflict", err)
	}
	if err := s.InsertRunLink(ctx, &store.RunLink{RunID: "ghost", ParentRunID: "orig", OriginalRunID: "orig"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("link of a missing run: %v, want ErrNotFound", err)
	}
}
