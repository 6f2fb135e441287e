// Package storetest is the conformance suite every store.Store
// implementation must pass (store/sqlite and store/postgres run it from
// their tests). It checks field round-trips (JSON lists and maps keeping nil
// apart from empty, times to the millisecond), conditional status
// transitions, dedup conflicts, dispatch-queue claim semantics under
// concurrency, atomic run creation, tokens and run listing, and the
// approval layer: holds decided once under concurrent deciders, pending
// holds blocking context deletion, trust-policy updates that lose nothing
// and are audited in the same transaction.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// Run runs the conformance suite as parallel subtests of t. newStore must
// return a fresh, empty, migrated store for the subtest it is given and
// arrange (t.Cleanup) for it to be closed and removed.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		// The longest cases first, so that parallel runs end together.
		{"Ingress", testIngress},
		{"Sources", testSources},
		{"Retention", testRetention},
		{"Schedules", testSchedules},
		{"Nodes", testNodes},
		{"Deliveries", testDeliveries},
		{"AcceptBurst", testAcceptBurst},
		{"DeliveryClaims", testDeliveryClaims},
		{"AcceptedClaim", testAcceptedClaim},
		{"RunRoundTrip", testRunRoundTrip},
		{"CreateRunAtomic", testCreateRunAtomic},
		{"FinishDeliveryWithRuns", testFinishDeliveryWithRuns},
		{"FinishDeliveries", testFinishDeliveries},
		{"RunTransitions", testRunTransitions},
		{"MoveJob", testMoveJob},
		{"StartJob", testStartJob},
		{"ReleaseJob", testReleaseJob},
		{"ReleaseJobsConcurrently", testReleaseJobsConcurrently},
		{"MoveRun", testMoveRun},
		{"SetPendingReasons", testSetPendingReasons},
		{"JobTransitions", testJobTransitions},
		{"ListJobsByStatus", testListJobsByStatus},
		{"Steps", testSteps},
		{"Queue", testQueue},
		{"ClaimNextMatching", testClaimNextMatching},
		{"ClaimNextConcurrent", testClaimNextConcurrent},
		{"AgentTokens", testAgentTokens},
		{"AgentSessions", testAgentSessions},
		{"AdminTokens", testAdminTokens},
		{"ListRuns", testListRuns},
		{"TimesUTCMillis", testTimes},
		{"Provenance", testProvenance},
		{"RunControl", testRunControl},
		{"CheckRuns", testCheckRuns},
		{"SourceLifecycle", testSourceLifecycle},
		{"IngressSource", testIngressSource},
		{"ClusterSettings", testClusterSettings},
		{"Security", testSecurity},
		{"Contexts", testContexts},
		{"ContextGateFields", testContextGateFields},
		{"ContextSourceOverrides", testContextSourceOverrides},
		{"ContextDeleteBlockedByHolds", testContextDeleteBlockedByHolds},
		{"ContextConcurrencyLimit", testContextConcurrencyLimit},
		{"ContextConcurrencyStrategy", testContextConcurrencyStrategy},
		{"ContextSlots", testContextSlots},
		{"ContextSlotsConcurrent", testContextSlotsConcurrent},
		{"ContextSlotsAllOrNone", testContextSlotsAllOrNone},
		{"RunTrustFields", testRunTrustFields},
		{"HeldRuns", testHeldRuns},
		{"ListHeldRuns", testListHeldRuns},
		{"HeldRunGroups", testHeldRunGroups},
		{"DecideHeldRunConcurrent", testDecideHeldRunConcurrent},
		{"TrustPolicy", testTrustPolicy},
		{"CacheEntries", testCacheEntries},
		{"Artifacts", testArtifacts},
		{"JobCredentials", testJobCredentials},
		{"TrustPolicyConcurrent", testTrustPolicyConcurrent},
		{"TrustDirectory", testTrustDirectory},
		{"WorkflowData", testWorkflowData},
		{"DispatchRows", testDispatchRows},
		{"Notifications", testNotifications},
		{"WebSessions", testWebSessions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// base is a millisecond-precise UTC reference time.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func at(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }

func ptime(t time.Time) *time.Time { return &t }
func pstr(s string) *string        { return &s }
func pint64(n int64) *int64        { return &n }
func pint(n int) *int              { return &n }

// ctxT bounds one conformance part: a hung store call fails the test
// instead of the package's timeout. 5 minutes: a part takes seconds, but a
// starved machine was seen taking over 60 s on the longest.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func same(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Errorf("%s mismatch:\n%s", what, d)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: want %v, got %v", what, target, err)
	}
}

func wantChanged(t *testing.T, what string, ok bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if ok != want {
		t.Errorf("%s: changed=%v, want %v", what, ok, want)
	}
}

func ids[T any](list []*T, id func(*T) string) []string {
	out := []string{}
	for _, v := range list {
		out = append(out, id(v))
	}
	return out
}

// ---------------------------------------------------------------- sources

func testSources(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a := &store.Source{ID: "src-a", OrgID: "org1", Name: "repo-a", Provider: provider.Local, RoutingKey: "generic:org1:src-a",
		LocalPath: "/srv/repo-a", VerificationMethod: "hmac_sha256", WebhookSecret: "s3cret", Enabled: true, CreatedAt: at(0)}
	b := &store.Source{ID: "src-b", OrgID: "org1", Name: "repo-b", Provider: provider.Generic, RoutingKey: "generic:org1:src-b",
		VerificationMethod: "none", Enabled: false, CreatedAt: at(1)}
	c := &store.Source{ID: "src-c", OrgID: "org2", Name: "repo-a", Provider: provider.Generic, Enabled: true, CreatedAt: at(-1)}
	for _, src := range []*store.Source{a, b, c} {
		must(t, s.CreateSource(ctx, src))
	}
	got, err := s.GetSource(ctx, "src-a")
	must(t, err)
	same(t, "GetSource", a, got)
	got, err = s.GetSource(ctx, "src-b")
	must(t, err)
	same(t, "GetSource disabled", b, got)
	got, err = s.GetSourceByName(ctx, "org2", "repo-a")
	must(t, err)
	same(t, "GetSourceByName", c, got)

	_, err = s.GetSource(ctx, "nope")
	wantErr(t, "GetSource unknown", err, store.ErrNotFound)
	_, err = s.GetSourceByName(ctx, "org2", "repo-b")
	wantErr(t, "GetSourceByName unknown", err, store.ErrNotFound)

	err = s.CreateSource(ctx, &store.Source{ID: "src-d", OrgID: "org1", Name: "repo-a", Provider: provider.Generic, CreatedAt: at(5)})
	wantErr(t, "CreateSource duplicate (org, name)", err, store.ErrConflict)
	err = s.CreateSource(ctx, &store.Source{ID: "src-a", OrgID: "org3", Name: "other", Provider: provider.Generic, CreatedAt: at(5)})
	wantErr(t, "CreateSource duplicate id", err, store.ErrConflict)

	all, err := s.ListSources(ctx, "")
	must(t, err)
	same(t, "ListSources all (oldest first)", []string{"src-c", "src-a", "src-b"}, ids(all, func(x *store.Source) string { return x.ID }))
	org1, err := s.ListSources(ctx, "org1")
	must(t, err)
	same(t, "ListSources org1", []*store.Source{a, b}, org1)
	none, err := s.ListSources(ctx, "org-none")
	must(t, err)
	if len(none) != 0 {
		t.Errorf("ListSources unknown org: %d sources", len(none))
	}

	d := &store.Source{ID: "src-default", OrgID: "org9", Name: "x", Provider: provider.Generic}
	must(t, s.CreateSource(ctx, d))
	if d.CreatedAt.IsZero() {
		t.Errorf("CreateSource: zero CreatedAt not defaulted")
	}
	got, err = s.GetSource(ctx, d.ID)
	must(t, err)
	same(t, "defaulted source", d, got)
}

// ---------------------------------------------------------------- deliveries

func testDeliveries(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	payload := json.RawMessage(`{"ref":"refs/heads/main",  "after":"abc","nested":{"z":1,"a":[true,null]}}`)
	d1 := &store.Delivery{ID: "generic:o:s:1", SourceID: "s", OrgID: "o", Event: "push", Payload: payload,
		Status: store.DeliveryReceived, ReceivedAt: at(0)}
	must(t, s.InsertDelivery(ctx, d1))
	got, err := s.GetDelivery(ctx, d1.ID)
	must(t, err)
	same(t, "GetDelivery", d1, got)
	if got.Decisions != nil || got.ProcessedAt != nil {
		t.Errorf("fresh delivery has decisions %q / processedAt %v", got.Decisions, got.ProcessedAt)
	}

	dup := &store.Delivery{ID: d1.ID, SourceID: "other", OrgID: "o", Event: "tag", Payload: json.RawMessage(`{}`), ReceivedAt: at(9)}
	wantErr(t, "InsertDelivery duplicate", s.InsertDelivery(ctx, dup), store.ErrConflict)
	got, err = s.GetDelivery(ctx, d1.ID)
	must(t, err)
	same(t, "delivery unchanged after duplicate", d1, got)

	_, err = s.GetDelivery(ctx, "missing")
	wantErr(t, "GetDelivery unknown", err, store.ErrNotFound)

	// Defaults: empty status is "received", zero time is now.
	d2 := &store.Delivery{ID: "generic:o:s:2", SourceID: "s", OrgID: "o", Event: "push", Payload: json.RawMessage(`[]`), ReceivedAt: at(2)}
	must(t, s.InsertDelivery(ctx, d2))
	if d2.Status != store.DeliveryReceived {
		t.Errorf("InsertDelivery default status = %q", d2.Status)
	}
	d3 := &store.Delivery{ID: "generic:o:s:3", SourceID: "s", OrgID: "o", Event: "push", ReceivedAt: at(1)}
	must(t, s.InsertDelivery(ctx, d3))
	got, err = s.GetDelivery(ctx, d3.ID)
	must(t, err)
	same(t, "delivery with nil payload", d3, got)
	d4 := &store.Delivery{ID: "generic:o:s:4", SourceID: "s", OrgID: "o", Event: "push"}
	must(t, s.InsertDelivery(ctx, d4))
	if d4.ReceivedAt.IsZero() {
		t.Errorf("InsertDelivery: zero ReceivedAt not defaulted")
	}

	un, err := s.ListUnprocessedDeliveries(ctx, 0)
	must(t, err)
	same(t, "ListUnprocessedDeliveries", []string{d1.ID, d3.ID, d2.ID, d4.ID}, ids(un, func(x *store.Delivery) string { return x.ID }))
	un, err = s.ListUnprocessedDeliveries(ctx, 2)
	must(t, err)
	same(t, "ListUnprocessedDeliveries limit", []string{d1.ID, d3.ID}, ids(un, func(x *store.Delivery) string { return x.ID }))

	decisions := json.RawMessage(`[{"name":"ci","matched":true}]`)
	before := time.Now().Add(-time.Second)
	must(t, s.FinishDelivery(ctx, d1.ID, store.DeliveryProcessed, "", decisions))
	must(t, s.FinishDelivery(ctx, d3.ID, store.DeliveryFailed, "lock file missing", nil))
	got, err = s.GetDelivery(ctx, d1.ID)
	must(t, err)
	if got.Status != store.DeliveryProcessed || got.Error != "" || string(got.Decisions) != string(decisions) {
		t.Errorf("finished delivery: %+v", got)
	}
	if got.ProcessedAt == nil || got.ProcessedAt.Before(before) || got.ProcessedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("finished delivery processedAt = %v", got.ProcessedAt)
	}
	same(t, "payload after finish", payload, got.Payload)
	got, err = s.GetDelivery(ctx, d3.ID)
	must(t, err)
	if got.Status != store.DeliveryFailed || got.Error != "lock file missing" || got.Decisions != nil || got.ProcessedAt == nil {
		t.Errorf("failed delivery: %+v", got)
	}
	wantErr(t, "FinishDelivery unknown", s.FinishDelivery(ctx, "missing", store.DeliveryProcessed, "", nil), store.ErrNotFound)

	un, err = s.ListUnprocessedDeliveries(ctx, 10)
	must(t, err)
	same(t, "ListUnprocessedDeliveries after finish", []string{d2.ID, d4.ID}, ids(un, func(x *store.Delivery) string { return x.ID }))
	n, oldest, err := s.CountUnprocessedDeliveries(ctx)
	must(t, err)
	if first := un[0].ReceivedAt; n != 2 || oldest == nil || !oldest.Equal(first) {
		t.Errorf("CountUnprocessedDeliveries = %d, %v; want 2, %v", n, oldest, first)
	}
	must(t, s.FinishDelivery(ctx, d2.ID, store.DeliveryProcessed, "", nil))
	must(t, s.FinishDelivery(ctx, d4.ID, store.DeliveryProcessed, "", nil))
	if n, oldest, err := s.CountUnprocessedDeliveries(ctx); err != nil || n != 0 || oldest != nil {
		t.Errorf("CountUnprocessedDeliveries with none left = %d, %v, %v; want 0, nil", n, oldest, err)
	}
}
