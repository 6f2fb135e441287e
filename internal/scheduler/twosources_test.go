package scheduler

import (
	"context"
	"encoding/json"
	"testing"

	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// TestRepositoryUnderTwoSourcesFiresOnce: one repository registered under
// two sources (each with the same scheduled workflow) fires each instant
// once, through an enabled source; pausing that source moves the schedule
// to the other one instead of silencing or doubling it.
func TestRepositoryUnderTwoSourcesFiresOnce(t *testing.T) {
	st := teststore.SQLite(t)
	ctx := context.Background()
	wf := json.RawMessage(`{"name":"nightly","source":{"file":"x","export":"#default"},"contentHash":"x","compileSchemaVersion":5,` +
		`"triggers":[{"_type":"schedule","cronExpression":"*/5 * * * *","timezone":""}],` +
		`"jobs":[{"_type":"static","name":"build","runsOn":[{"kind":"exact","value":"nowhere"}],"needs":[],"steps":[{"name":"s","run":"true"}]}]}`)
	for _, id := range []string{"src-a", "src-b"} {
		if err := st.CreateSource(ctx, &store.Source{ID: id, OrgID: "acme", Name: id, Provider: provider.Local, Enabled: true}); err != nil {
			t.Fatal(err)
		}
		if err := st.ReplaceRegistrations(ctx, id, "acme/app", []*store.Registration{{OrgID: "acme", RoutingKey: "rk-" + id,
			Provider: provider.Local, WorkflowName: "nightly", TriggerTypes: []string{"schedule"}, Workflow: wf, SHA: "abc",
			CreatedAt: utc("2026-01-01T00:00:00Z")}}); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: utc("2026-01-05T10:01:00Z")}
	rec := &recorder{fired: map[string]*ingest.InternalEvent{}}
	s := New(st, rec.emit, nil)
	s.Now = c.now
	tick := func(at string) {
		t.Helper()
		c.set(utc(at))
		if err := s.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tick("2026-01-05T10:01:00Z")
	tick("2026-01-05T10:05:10Z")
	// 10:00 is caught up at start (within the window), then 10:05.
	if got := rec.times(); len(got) != 2 || got[0] != "2026-01-05T10:00:00Z" || got[1] != "2026-01-05T10:05:00Z" {
		t.Fatalf("fired %v, want 10:00 and 10:05 once each for the repository", got)
	}
	var firstVia string
	for _, ie := range rec.fired {
		if ie.ScheduledAt == "2026-01-05T10:05:00Z" {
			firstVia = ie.TargetSourceID
		}
	}
	other := map[string]string{"src-a": "src-b", "src-b": "src-a"}[firstVia]
	if err := st.SetSourceEnabled(ctx, firstVia, false); err != nil {
		t.Fatal(err)
	}
	tick("2026-01-05T10:10:10Z")
	got := rec.times()
	if len(got) != 3 || got[2] != "2026-01-05T10:10:00Z" {
		t.Fatalf("fired %v, want 10:00, 10:05 then 10:10 once each", got)
	}
	for _, ie := range rec.fired {
		if ie.ScheduledAt == "2026-01-05T10:10:00Z" && ie.TargetSourceID != other {
			t.Fatalf("10:10 fired through %s, which is paused; want %s", ie.TargetSourceID, other)
		}
	}
}
