package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// testSourceLifecycle covers pausing and removing a source:
// SetSourceEnabled flips the flag (ErrNotFound for an unknown id), and
// DeleteSource removes the source with its settings, secrets,
// registrations and the overrides of a routing key no other source
// carries, writes its audit row in the same transaction, and leaves
// deliveries, the event log, rejected deliveries and runs alone.
func testSourceLifecycle(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mk := func(id, name string, prov provider.Name, rk string) {
		t.Helper()
		src := &store.Source{ID: id, OrgID: "acme", Name: name, Provider: prov, RoutingKey: rk,
			VerificationMethod: "hmac_sha256", Enabled: true, CreatedAt: at(0)}
		must(t, s.CreateSourceWithSettings(ctx, src, &store.SourceSettings{RateLimitRPM: 5},
			[]*store.SourceSecret{{ID: id + "-sec", Secret: "x", CreatedAt: at(0)}}))
	}
	mk("src-a", "a", provider.Generic, "generic:acme:src-a")
	mk("src-keep", "keep", provider.Generic, "generic:acme:src-keep")
	mk("src-gh1", "gh1", provider.GitHub, "github:7")
	mk("src-gh2", "gh2", provider.GitHub, "github:7")

	// Enable / disable.
	must(t, s.SetSourceEnabled(ctx, "src-a", false))
	if got, err := s.GetSource(ctx, "src-a"); err != nil || got.Enabled {
		t.Fatalf("after disable: %+v, %v; want enabled false", got, err)
	}
	must(t, s.SetSourceEnabled(ctx, "src-a", false)) // idempotent, still found
	if got, _ := s.GetSource(ctx, "src-keep"); !got.Enabled {
		t.Fatal("disabling one source disabled another")
	}
	must(t, s.SetSourceEnabled(ctx, "src-a", true))
	if got, err := s.GetSource(ctx, "src-a"); err != nil || !got.Enabled {
		t.Fatalf("after enable: %+v, %v; want enabled true", got, err)
	}
	if err := s.SetSourceEnabled(ctx, "nope", false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetSourceEnabled(unknown) = %v, want ErrNotFound", err)
	}

	// What the source owns, and history that must survive it.
	reg := func(id, src string) *store.Registration {
		return &store.Registration{ID: id, OrgID: "acme", SourceID: src, RoutingKey: "rk", Provider: provider.Generic,
			RepoIdentifier: "acme/app", WorkflowName: "ci", TriggerTypes: []string{"schedule"},
			Workflow: json.RawMessage(`{"name":"ci"}`), CreatedAt: at(1)}
	}
	must(t, s.ReplaceRegistrations(ctx, "src-a", "acme/app", []*store.Registration{reg("reg-a", "src-a")}))
	must(t, s.ReplaceRegistrations(ctx, "src-keep", "acme/app", []*store.Registration{reg("reg-keep", "src-keep")}))
	d := &store.Delivery{ID: "generic:acme:src-a:d1", SourceID: "src-a", OrgID: "acme", Event: "push",
		Payload: json.RawMessage(`{}`), ReceivedAt: at(2)}
	must(t, s.AcceptDelivery(ctx, d, &store.EventLogEntry{OrgID: "acme", SourceID: "src-a", RoutingKey: "generic:acme:src-a",
		Event: "push", Source: "direct", Provider: provider.Generic}))
	must(t, s.RecordRejected(ctx, &store.RejectedDelivery{SourceID: "src-a", OrgID: "acme", Route: "generic",
		StatusCode: 401, Reason: "bad signature", ReceivedAt: at(3)}))
	run := fullRun("run-a", at(4))
	run.SourceID, run.DeliveryID = "src-a", d.ID
	must(t, s.CreateRun(ctx, run, []*store.Job{{ID: "job-a", JobName: "build"}}))
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "prod", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, rk := range []string{"generic:acme:src-a", "generic:acme:src-keep", "github:7"} {
		must(t, s.PutContextSourceOverride(ctx, "acme", "prod", &store.ContextSourceOverride{RoutingKey: rk, Key: "K", Value: "v"}))
	}
	overrideKeys := func() map[string]bool {
		t.Helper()
		os, err := s.ListContextSourceOverrides(ctx, "acme", "prod", "")
		must(t, err)
		m := map[string]bool{}
		for _, o := range os {
			m[o.RoutingKey] = true
		}
		return m
	}

	audit := &store.AccessLogEntry{TokenID: "tok", Role: "owner", Action: "source.delete", Resource: "source:src-a", Detail: "name=a"}
	must(t, s.DeleteSource(ctx, "src-a", audit))

	if _, err := s.GetSource(ctx, "src-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted source: GetSource err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetSourceByName(ctx, "acme", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted source: GetSourceByName err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetSourceSettings(ctx, "src-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted source's settings: err = %v, want ErrNotFound", err)
	}
	if secs, err := s.ListSourceSecrets(ctx, "src-a", false); err != nil || len(secs) != 0 {
		t.Fatalf("deleted source's secrets = %+v, %v; want none", secs, err)
	}
	regs, err := s.ListRegistrations(ctx, store.RegistrationFilter{OrgID: "acme"})
	must(t, err)
	if len(regs) != 1 || regs[0].ID != "reg-keep" {
		t.Fatalf("registrations after delete = %+v, want only reg-keep", regs)
	}
	if _, err := s.GetRegistration(ctx, "reg-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted source's registration: err = %v, want ErrNotFound", err)
	}
	if ok := overrideKeys(); ok["generic:acme:src-a"] || !ok["generic:acme:src-keep"] || !ok["github:7"] {
		t.Fatalf("overrides after delete = %v, want src-keep and github:7 only", ok)
	}
	// History stays.
	if got, err := s.GetDelivery(ctx, d.ID); err != nil || got.SourceID != "src-a" {
		t.Fatalf("delivery after source delete = %+v, %v", got, err)
	}
	if e, err := s.GetEventLog(ctx, "", d.ID); err != nil || e.SourceID != "src-a" {
		t.Fatalf("event log after source delete = %+v, %v", e, err)
	}
	if rej, err := s.ListRejected(ctx, "src-a", 0); err != nil || len(rej) != 1 {
		t.Fatalf("rejected deliveries after source delete = %+v, %v; want 1", rej, err)
	}
	if got, err := s.GetRun(ctx, "run-a"); err != nil || got.SourceID != "src-a" {
		t.Fatalf("run after source delete = %+v, %v", got, err)
	}
	if jobs, err := s.ListJobs(ctx, "run-a"); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after source delete = %+v, %v", jobs, err)
	}
	// The audit row was written with the change.
	entries, err := s.ListAccessLog(ctx, store.AccessLogFilter{Action: "source.delete"})
	must(t, err)
	if len(entries) != 1 || entries[0].Resource != "source:src-a" || entries[0].TokenID != "tok" || entries[0].Detail != "name=a" {
		t.Fatalf("audit rows = %+v, want one source.delete for src-a", entries)
	}

	// Unknown (or already deleted): ErrNotFound and no audit row.
	if err := s.DeleteSource(ctx, "src-a", &store.AccessLogEntry{Action: "source.delete", Resource: "source:src-a"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteSource = %v, want ErrNotFound", err)
	}
	if entries, _ := s.ListAccessLog(ctx, store.AccessLogFilter{Action: "source.delete"}); len(entries) != 1 {
		t.Fatalf("a refused delete wrote an audit row: %+v", entries)
	}
	// The name is free again.
	mk("src-a2", "a", provider.Generic, "generic:acme:src-a2")

	// A routing key shared by two sources keeps its overrides until the
	// last of them goes.
	must(t, s.DeleteSource(ctx, "src-gh1", nil))
	if !overrideKeys()["github:7"] {
		t.Fatal("github:7 overrides removed while src-gh2 still carries the key")
	}
	must(t, s.DeleteSource(ctx, "src-gh2", nil))
	if overrideKeys()["github:7"] {
		t.Fatal("github:7 overrides kept after the last source with the key was deleted")
	}
}
