package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// testIngress covers store.IngressStore: atomic source+settings+secrets
// creation, secret rotation, accept-once deliveries with their event-log
// entry, duplicates, outcomes, filters, rejected records, registrations
// and leases.
func testIngress(t *testing.T, s store.Store) {
	ctx := ctxT(t)

	// Source with settings and two secrets, atomically.
	src := &store.Source{ID: "src-gh", OrgID: "acme", Name: "gh", Provider: provider.GitHub, RoutingKey: "github:42",
		VerificationMethod: "hmac_sha256", Enabled: true, CreatedAt: at(0)}
	set := &store.SourceSettings{MaxPayloadBytes: 1234, RateLimitRPM: 7, IPAllowlist: []string{"10.0.0.1"},
		GitHub: &store.GitHubConfig{AppID: 42, PrivateKeyPEM: "pem", APIBaseURL: "http://x"},
		Git:    &store.GitConfig{Preset: "gitea", GitURLTemplate: "https://g/{repo}.git", CredentialType: "pat", Credential: "c"}}
	must(t, s.CreateSourceWithSettings(ctx, src, set, []*store.SourceSecret{{ID: "s1", Secret: "one", CreatedAt: at(0)}, {ID: "s2", Secret: "two", CreatedAt: at(1)}}))
	// A conflicting name writes nothing: no settings row for the new id.
	dup := &store.Source{ID: "src-dup", OrgID: "acme", Name: "gh", Provider: provider.GitHub, Enabled: true}
	if err := s.CreateSourceWithSettings(ctx, dup, &store.SourceSettings{RateLimitRPM: 1}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate source name: err = %v, want ErrConflict", err)
	}
	if _, err := s.GetSourceSettings(ctx, "src-dup"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("settings of a refused source: err = %v, want ErrNotFound (transaction not atomic)", err)
	}
	got, err := s.GetSourceSettings(ctx, "src-gh")
	must(t, err)
	if got.MaxPayloadBytes != 1234 || got.RateLimitRPM != 7 || got.GitHub == nil || got.GitHub.AppID != 42 ||
		got.GitHub.PrivateKeyPEM != "pem" || len(got.IPAllowlist) != 1 || got.Git == nil || got.Git.Credential != "c" {
		t.Fatalf("settings round trip = %+v", got)
	}
	got.RateLimitRPM = 9
	must(t, s.PutSourceSettings(ctx, got))
	if g2, _ := s.GetSourceSettings(ctx, "src-gh"); g2.RateLimitRPM != 9 {
		t.Fatalf("PutSourceSettings did not replace: %+v", g2)
	}
	secs, err := s.ListSourceSecrets(ctx, "src-gh", true)
	must(t, err)
	if len(secs) != 2 || secs[0].Secret != "one" || secs[1].Secret != "two" {
		t.Fatalf("active secrets = %+v", secs)
	}
	must(t, s.RevokeSourceSecret(ctx, "src-gh", "s1", at(5)))
	if err := s.RevokeSourceSecret(ctx, "src-gh", "s1", at(6)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second revoke: err = %v, want ErrNotFound", err)
	}
	secs, _ = s.ListSourceSecrets(ctx, "src-gh", true)
	all, _ := s.ListSourceSecrets(ctx, "src-gh", false)
	if len(secs) != 1 || secs[0].ID != "s2" || len(all) != 2 || all[0].RevokedAt == nil || !all[0].RevokedAt.Equal(at(5)) {
		t.Fatalf("after revoke: active %+v all %+v", secs, all)
	}
	// Re-encryption at rest rewrites stored values in place, a revoked
	// secret's too; unknown ids are ErrNotFound; the scrub runs.
	must(t, s.SetSourceWebhookSecret(ctx, "src-gh", "sealed-form"))
	must(t, s.SetSourceSecretValue(ctx, "s1", "sealed-one"))
	if err := s.SetSourceWebhookSecret(ctx, "nope", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rewrite of an unknown source: %v", err)
	}
	if err := s.SetSourceSecretValue(ctx, "nope", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rewrite of an unknown secret: %v", err)
	}
	if sc, ok := s.(interface{ ScrubSourceSecrets(context.Context) error }); ok {
		must(t, sc.ScrubSourceSecrets(ctx))
	}
	if got, _ := s.GetSource(ctx, "src-gh"); got.WebhookSecret != "sealed-form" {
		t.Fatalf("source secret after rewrite: %q", got.WebhookSecret)
	}
	if all, _ := s.ListSourceSecrets(ctx, "src-gh", false); all[0].Secret != "sealed-one" || all[0].RevokedAt == nil {
		t.Fatalf("revoked secret after rewrite: %+v", all[0])
	}

	// Accept once, concurrently: exactly one winner, one primary entry.
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &store.Delivery{ID: "github:42:d1", SourceID: "src-gh", OrgID: "acme", Event: "push", Payload: json.RawMessage(`{"a":1}`), ReceivedAt: at(10)}
			e := &store.EventLogEntry{OrgID: "acme", SourceID: "src-gh", RoutingKey: "github:42", Event: "push", Source: "direct",
				Provider: provider.GitHub, PayloadGz: []byte{1, 2, 3}, PayloadSizeBytes: 7, PayloadHash: "h"}
			err := s.AcceptDelivery(ctx, d, e)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrConflict):
				conflicts.Add(1)
				must(t, s.RecordDuplicate(ctx, &store.EventLogEntry{DeliveryID: d.ID, OrgID: "acme", RoutingKey: "github:42", Event: "push", Source: "direct", Provider: provider.GitHub, ReceivedAt: at(11)}))
			default:
				t.Errorf("AcceptDelivery: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 19 {
		t.Fatalf("concurrent accept: %d wins, %d conflicts; want 1 and 19", wins.Load(), conflicts.Load())
	}
	d, err := s.GetDelivery(ctx, "github:42:d1")
	must(t, err)
	if d.Status != store.DeliveryReceived || string(d.Payload) != `{"a":1}` {
		t.Fatalf("accepted delivery = %+v", d)
	}
	e, err := s.GetEventLog(ctx, "", "github:42:d1")
	must(t, err)
	if e.Status != store.EventLogReceived || string(e.PayloadGz) != "\x01\x02\x03" || e.PayloadSizeBytes != 7 || !e.ReceivedAt.Equal(at(10)) {
		t.Fatalf("primary entry = %+v", e)
	}
	if _, err := s.GetEventLog(ctx, "other-org", "github:42:d1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event log of another org: err = %v, want ErrNotFound", err)
	}
	_, n, err := s.ListEventLog(ctx, store.EventLogFilter{Status: store.EventLogDuplicate})
	must(t, err)
	if n != 19 {
		t.Fatalf("duplicate entries = %d, want 19", n)
	}

	// Outcome: delivery and entry change together.
	must(t, s.FinishDeliveryOutcome(ctx, "github:42:d1", store.DeliveryProcessed, "", json.RawMessage(`{"summary":"s"}`),
		store.EventOutcome{Status: store.EventLogLockfileMissing, MatchedCount: 2, RunIDs: []string{"r1", "r2"}, RepoIdentifier: "o/r", Ref: "refs/heads/main"}))
	if err := s.FinishDeliveryOutcome(ctx, "nope", store.DeliveryProcessed, "", nil, store.EventOutcome{Status: store.EventLogProcessed}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("outcome of unknown delivery: err = %v, want ErrNotFound", err)
	}
	d, _ = s.GetDelivery(ctx, "github:42:d1")
	e, _ = s.GetEventLog(ctx, "acme", "github:42:d1")
	if d.Status != store.DeliveryProcessed || e.Status != store.EventLogLockfileMissing || e.MatchedCount != 2 ||
		fmt.Sprint(e.RunIDs) != "[r1 r2]" || e.RepoIdentifier != "o/r" || e.Ref != "refs/heads/main" || e.ProcessedAt == nil {
		t.Fatalf("after outcome: delivery %+v entry %+v", d, e)
	}
	// A second accepted delivery; filters.
	must(t, s.AcceptDelivery(ctx, &store.Delivery{ID: "generic:acme:x:k", SourceID: "src-x", OrgID: "beta", Event: "deploy", ReceivedAt: at(20)},
		&store.EventLogEntry{OrgID: "beta", RoutingKey: "generic:acme:x", Event: "deploy", Action: "go", Source: "direct", Provider: provider.Generic}))
	list, n, err := s.ListEventLog(ctx, store.EventLogFilter{OrgID: "beta"})
	must(t, err)
	if n != 1 || len(list) != 1 || list[0].DeliveryID != "generic:acme:x:k" || list[0].Action != "go" {
		t.Fatalf("org filter: n=%d %+v", n, list)
	}
	for _, f := range []store.EventLogFilter{{DeliveryID: "acme:x"}, {Event: "deploy"}, {From: ptime(at(15))}, {Status: store.EventLogReceived}} {
		_, n, err := s.ListEventLog(ctx, f)
		must(t, err)
		if n != 1 {
			t.Errorf("filter %+v: %d entries, want 1", f, n)
		}
	}
	page, n, err := s.ListEventLog(ctx, store.EventLogFilter{Limit: 5, Offset: 0})
	must(t, err)
	if n != 21 || len(page) != 5 || page[0].DeliveryID != "generic:acme:x:k" {
		t.Fatalf("page: total %d len %d first %+v", n, len(page), page[0])
	}

	// Rejected deliveries.
	must(t, s.RecordRejected(ctx, &store.RejectedDelivery{SourceID: "src-gh", OrgID: "acme", Route: "github", StatusCode: 401, Reason: "invalid signature", ReceivedAt: at(30)}))
	must(t, s.RecordRejected(ctx, &store.RejectedDelivery{SourceID: "other", StatusCode: 413, Reason: "too large", ReceivedAt: at(31)}))
	rej, err := s.ListRejected(ctx, "src-gh", 0)
	must(t, err)
	if len(rej) != 1 || rej[0].StatusCode != 401 || rej[0].Reason != "invalid signature" {
		t.Fatalf("rejected = %+v", rej)
	}
	if all, _ := s.ListRejected(ctx, "", 0); len(all) != 2 || all[0].StatusCode != 413 {
		t.Fatalf("all rejected (newest first) = %+v", all)
	}

	// The newest MaxRejectedPerSource records per source are kept.
	for i := 0; i < store.MaxRejectedPerSource+5; i++ {
		must(t, s.RecordRejected(ctx, &store.RejectedDelivery{SourceID: "flood", StatusCode: 401, Reason: "invalid signature", ReceivedAt: at(100 + i)}))
	}
	flood, err := s.ListRejected(ctx, "flood", 5000)
	must(t, err)
	if len(flood) != store.MaxRejectedPerSource || !flood[0].ReceivedAt.Equal(at(100+store.MaxRejectedPerSource+4)) {
		t.Fatalf("after a flood: %d records kept (newest %v), want %d newest", len(flood), flood[0].ReceivedAt, store.MaxRejectedPerSource)
	}

	// Registrations: replace per (source, repo).
	reg := func(name string, types ...string) *store.Registration {
		return &store.Registration{OrgID: "acme", RoutingKey: "github:42", Provider: provider.GitHub, WorkflowName: name,
			TriggerTypes: types, Workflow: json.RawMessage(`{"name":"` + name + `"}`), SHA: "abc"}
	}
	must(t, s.ReplaceRegistrations(ctx, "src-gh", "acme/api", []*store.Registration{reg("a", "push", "schedule"), reg("b", "kici_event")}))
	must(t, s.ReplaceRegistrations(ctx, "src-gh", "acme/web", []*store.Registration{reg("c", "schedule")}))
	must(t, s.ReplaceRegistrations(ctx, "src-gh", "acme/api", []*store.Registration{reg("a2", "schedule")}))
	regs, err := s.ListRegistrations(ctx, store.RegistrationFilter{TriggerType: "schedule"})
	must(t, err)
	if len(regs) != 2 {
		t.Fatalf("schedule registrations = %d, want 2 (a replaced by a2)", len(regs))
	}
	if regs, _ := s.ListRegistrations(ctx, store.RegistrationFilter{TriggerType: "kici_event"}); len(regs) != 0 {
		t.Fatalf("kici_event registrations after replace = %d, want 0", len(regs))
	}
	for _, c := range []struct {
		f    store.RegistrationFilter
		want bool
	}{
		{store.RegistrationFilter{TriggerType: "schedule"}, true},
		{store.RegistrationFilter{OrgID: "acme", TriggerType: "schedule"}, true},
		{store.RegistrationFilter{OrgID: "other", TriggerType: "schedule"}, false},
		{store.RegistrationFilter{TriggerType: "kici_event"}, false},
		{store.RegistrationFilter{OrgID: "acme", TriggerType: "job_complete"}, false},
		{store.RegistrationFilter{RepoIdentifier: "acme/web"}, true},
	} {
		got, err := s.HasRegistrations(ctx, c.f)
		must(t, err)
		if got != c.want {
			t.Errorf("HasRegistrations(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	regs, _ = s.ListRegistrations(ctx, store.RegistrationFilter{RepoIdentifier: "acme/api"})
	if len(regs) != 1 || regs[0].WorkflowName != "a2" || regs[0].SourceID != "src-gh" || string(regs[0].Workflow) != `{"name":"a2"}` {
		t.Fatalf("acme/api registrations = %+v", regs)
	}
	one, err := s.GetRegistration(ctx, regs[0].ID)
	must(t, err)
	if one.WorkflowName != "a2" || fmt.Sprint(one.TriggerTypes) != "[schedule]" {
		t.Fatalf("GetRegistration = %+v", one)
	}
	if _, err := s.GetRegistration(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRegistration(missing): %v", err)
	}

	// Leases: one holder at a time; renewal by the holder; takeover after
	// expiry. A's lease is long enough that B's attempt and A's renewal
	// come within it even on a starved machine.
	const leaseA = 3 * time.Second
	ok, err := s.AcquireLease(ctx, "scheduler", "A", leaseA)
	must(t, err)
	okB, err := s.AcquireLease(ctx, "scheduler", "B", time.Minute)
	must(t, err)
	okA2, err := s.AcquireLease(ctx, "scheduler", "A", leaseA)
	must(t, err)
	renewed := time.Now() // the renewed lease ends no later than leaseA from here
	if !ok || okB || !okA2 {
		t.Fatalf("lease: A=%v B=%v A-renew=%v; want true false true", ok, okB, okA2)
	}
	// The wall clock must move past the expiry the store recorded.
	if !wait.Elapse(ctx, time.Until(renewed.Add(leaseA+100*time.Millisecond))) {
		t.Fatalf("context ended waiting for the lease to expire: %v", ctx.Err())
	}
	okB, err = s.AcquireLease(ctx, "scheduler", "B", time.Minute)
	must(t, err)
	okA, err := s.AcquireLease(ctx, "scheduler", "A", time.Minute)
	must(t, err)
	if !okB || okA {
		t.Fatalf("after expiry: B=%v A=%v; want true false", okB, okA)
	}
}
