package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testFinishDeliveryWithRuns checks that a delivery's runs, jobs, run
// contexts and outcome are written together, and that a failure in the
// middle (a job id that already exists, in the second run) leaves the
// delivery received, its event-log entry untouched and no run of it; a
// finished or unknown delivery gets no run either.
func testFinishDeliveryWithRuns(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	accept := func(id string) {
		must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: "src", OrgID: "org", Event: "push", ReceivedAt: at(0)},
			&store.EventLogEntry{OrgID: "org", SourceID: "src", RoutingKey: "local:src", Event: "push", Source: "direct", Provider: provider.Local}))
	}
	newRun := func(delivery, id string, jobs int, rc *store.RunContext) store.NewRun {
		r := fullRun(id, at(1))
		r.DeliveryID = delivery
		nr := store.NewRun{Run: r, Context: rc}
		for i := range jobs {
			nr.Jobs = append(nr.Jobs, &store.Job{ID: fmt.Sprintf("%s-j%d", id, i), JobName: fmt.Sprintf("job-%d", i),
				Needs: []store.Need{}, RunsOnLabels: []string{"linux"}})
		}
		return nr
	}
	decisions := json.RawMessage(`{"summary":"2 of 2 workflows matched; 2 runs created"}`)
	outcome := store.EventOutcome{Status: store.EventLogProcessed, MatchedCount: 2, RunIDs: []string{"ok-a", "ok-b"}, Ref: "refs/heads/main"}

	// All written: 250 jobs in one run crosses a multi-row insert boundary.
	accept("local:src:ok")
	runs := []store.NewRun{newRun("local:src:ok", "ok-a", 250, &store.RunContext{ChangedPaths: []string{"a.go"}}),
		newRun("local:src:ok", "ok-b", 1, nil)}
	must(t, s.FinishDeliveryWithRuns(ctx, "local:src:ok", store.DeliveryProcessed, "", decisions, outcome, runs))
	d, err := s.GetDelivery(ctx, "local:src:ok")
	must(t, err)
	if d.Status != store.DeliveryProcessed || d.ProcessedAt == nil {
		t.Fatalf("finished delivery = %+v", d)
	}
	e, err := s.GetEventLog(ctx, "", "local:src:ok")
	must(t, err)
	if e.Status != store.EventLogProcessed || e.MatchedCount != 2 || len(e.RunIDs) != 2 {
		t.Fatalf("event log after finish = %+v", e)
	}
	got, total, err := s.ListRuns(ctx, store.RunFilter{DeliveryID: "local:src:ok"})
	must(t, err)
	if total != 2 || len(got) != 2 {
		t.Fatalf("runs of the delivery: %d (total %d), want 2", len(got), total)
	}
	jobs, err := s.ListJobs(ctx, "ok-a")
	must(t, err)
	if len(jobs) != 250 {
		t.Fatalf("jobs of ok-a: %d, want 250", len(jobs))
	}
	for i, j := range jobs {
		if j.JobName != fmt.Sprintf("job-%d", i) || j.Status != status.JobPending || j.RunID != "ok-a" || len(j.RunsOnLabels) != 1 {
			t.Fatalf("job %d = %+v", i, j)
		}
	}
	rc, err := s.GetRunContext(ctx, "ok-a")
	must(t, err)
	if len(rc.ChangedPaths) != 1 || rc.ChangedPaths[0] != "a.go" {
		t.Errorf("run context of ok-a = %+v", rc)
	}
	_, err = s.GetRunContext(ctx, "ok-b")
	wantErr(t, "run context of a run staged without one", err, store.ErrNotFound)

	// A failure in the second run leaves nothing of the first, and the
	// delivery and its event-log entry as accepted.
	accept("local:src:bad")
	bad := []store.NewRun{newRun("local:src:bad", "bad-a", 3, &store.RunContext{ChangedPaths: []string{"b.go"}}),
		newRun("local:src:bad", "bad-b", 2, nil)}
	bad[1].Jobs[1].ID = "ok-a-j7" // already a job of run ok-a
	err = s.FinishDeliveryWithRuns(ctx, "local:src:bad", store.DeliveryProcessed, "", decisions, outcome, bad)
	wantErr(t, "FinishDeliveryWithRuns with a colliding job id", err, store.ErrConflict)
	d, err = s.GetDelivery(ctx, "local:src:bad")
	must(t, err)
	if d.Status != store.DeliveryReceived || d.ProcessedAt != nil || d.Decisions != nil {
		t.Errorf("delivery after a failed finish = %+v, want it still received", d)
	}
	e, err = s.GetEventLog(ctx, "", "local:src:bad")
	must(t, err)
	if e.Status != store.EventLogReceived || e.ProcessedAt != nil || len(e.RunIDs) != 0 {
		t.Errorf("event log after a failed finish = %+v, want it still received", e)
	}
	got, total, err = s.ListRuns(ctx, store.RunFilter{DeliveryID: "local:src:bad"})
	must(t, err)
	if total != 0 || len(got) != 0 {
		t.Errorf("runs after a failed finish: %d (total %d), want none", len(got), total)
	}
	for _, id := range []string{"bad-a-j0", "bad-b-j0"} {
		_, err = s.GetJob(ctx, id)
		wantErr(t, "job "+id+" after a failed finish", err, store.ErrNotFound)
	}
	_, err = s.GetRunContext(ctx, "bad-a")
	wantErr(t, "run context after a failed finish", err, store.ErrNotFound)
	if j, err := s.GetJob(ctx, "ok-a-j7"); err != nil || j.RunID != "ok-a" {
		t.Errorf("colliding job after a failed finish: %+v, %v", j, err)
	}

	// A delivery finished already (by another node whose claim it took
	// over) is a conflict, and the runs staged again are not written.
	err = s.FinishDeliveryWithRuns(ctx, "local:src:ok", store.DeliveryProcessed, "", decisions, outcome,
		[]store.NewRun{newRun("local:src:ok", "again", 1, nil)})
	wantErr(t, "FinishDeliveryWithRuns of a finished delivery", err, store.ErrConflict)
	_, err = s.GetRun(ctx, "again")
	wantErr(t, "run staged for a finished delivery", err, store.ErrNotFound)

	// An unknown delivery writes no run either.
	err = s.FinishDeliveryWithRuns(ctx, "local:src:missing", store.DeliveryProcessed, "", decisions, outcome,
		[]store.NewRun{newRun("local:src:missing", "lost", 1, nil)})
	wantErr(t, "FinishDeliveryWithRuns of an unknown delivery", err, store.ErrNotFound)
	_, err = s.GetRun(ctx, "lost")
	wantErr(t, "run of an unknown delivery", err, store.ErrNotFound)
}

// testFinishDeliveries checks that a group of finishes is written in one
// transaction: every delivery of a group that succeeds is finished with its
// runs and event-log outcome, and a group holding one delivery that is no
// longer "received" (or unknown) is refused with ErrConflict and leaves
// every other delivery of it received, with no run.
func testFinishDeliveries(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, id := range []string{"g1", "g2", "g3", "g4"} {
		must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: id, SourceID: "src", OrgID: "org", Event: "push", ReceivedAt: at(0)},
			&store.EventLogEntry{OrgID: "org", SourceID: "src", RoutingKey: "local:src", Event: "push", Source: "direct", Provider: provider.Local}))
	}
	finish := func(id string, runs ...string) store.DeliveryFinish {
		f := store.DeliveryFinish{ID: id, Status: store.DeliveryProcessed, Decisions: json.RawMessage(`{"summary":"grouped"}`),
			Outcome: store.EventOutcome{Status: store.EventLogProcessed, MatchedCount: len(runs), RunIDs: runs}}
		for _, r := range runs {
			run := fullRun(r, at(1))
			run.DeliveryID = id
			f.Runs = append(f.Runs, store.NewRun{Run: run, Jobs: []*store.Job{{ID: r + "-j", JobName: "build", Needs: []store.Need{}, RunsOnLabels: []string{"linux"}}}})
		}
		return f
	}
	received := func(id string) {
		t.Helper()
		d, err := s.GetDelivery(ctx, id)
		must(t, err)
		if d.Status != store.DeliveryReceived || d.ProcessedAt != nil {
			t.Errorf("delivery %s after a refused group = %+v, want it still received", id, d)
		}
		if e, err := s.GetEventLog(ctx, "", id); err != nil || e.Status != store.EventLogReceived {
			t.Errorf("event log of %s after a refused group = %+v, %v", id, e, err)
		}
	}

	must(t, s.FinishDeliveries(ctx, []store.DeliveryFinish{finish("g1", "g1-a", "g1-b"), finish("g2"), finish("g3", "g3-a")}))
	for id, want := range map[string]int{"g1": 2, "g2": 0, "g3": 1} {
		d, err := s.GetDelivery(ctx, id)
		must(t, err)
		if d.Status != store.DeliveryProcessed || d.ProcessedAt == nil || string(d.Decisions) != `{"summary":"grouped"}` {
			t.Errorf("delivery %s after its group = %+v", id, d)
		}
		e, err := s.GetEventLog(ctx, "", id)
		must(t, err)
		if e.Status != store.EventLogProcessed || e.MatchedCount != want || len(e.RunIDs) != want {
			t.Errorf("event log of %s after its group = %+v", id, e)
		}
		_, total, err := s.ListRuns(ctx, store.RunFilter{DeliveryID: id})
		must(t, err)
		if total != want {
			t.Errorf("runs of %s: %d, want %d", id, total, want)
		}
	}
	if j, err := s.GetJob(ctx, "g3-a-j"); err != nil || j.Status != status.JobPending || j.RunID != "g3-a" {
		t.Errorf("job of a grouped run = %+v, %v", j, err)
	}

	// g1 is finished already: the whole group is refused, g4 (before it)
	// and its run included.
	err := s.FinishDeliveries(ctx, []store.DeliveryFinish{finish("g4", "g4-a"), finish("g1", "g1-again")})
	wantErr(t, "a group holding a finished delivery", err, store.ErrConflict)
	received("g4")
	for _, r := range []string{"g4-a", "g1-again"} {
		_, err = s.GetRun(ctx, r)
		wantErr(t, "run "+r+" of a refused group", err, store.ErrNotFound)
	}
	// So is a group holding an unknown delivery, wherever it stands.
	err = s.FinishDeliveries(ctx, []store.DeliveryFinish{finish("g4", "g4-a"), finish("nowhere", "lost")})
	wantErr(t, "a group holding an unknown delivery", err, store.ErrConflict)
	received("g4")
	// Alone, g4 is then finished.
	must(t, s.FinishDeliveries(ctx, []store.DeliveryFinish{finish("g4", "g4-a")}))
	if r, err := s.GetRun(ctx, "g4-a"); err != nil || r.DeliveryID != "g4" {
		t.Errorf("run of g4 = %+v, %v", r, err)
	}
}
