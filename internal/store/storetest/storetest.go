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
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

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
		{"RunRoundTrip", testRunRoundTrip},
		{"CreateRunAtomic", testCreateRunAtomic},
		{"RunTransitions", testRunTransitions},
		{"JobTransitions", testJobTransitions},
		{"ListJobsByStatus", testListJobsByStatus},
		{"Steps", testSteps},
		{"Queue", testQueue},
		{"ClaimNextMatching", testClaimNextMatching},
		{"ClaimNextConcurrent", testClaimNextConcurrent},
		{"AgentTokens", testAgentTokens},
		{"AdminTokens", testAdminTokens},
		{"ListRuns", testListRuns},
		{"TimesUTCMillis", testTimes},
		{"Provenance", testProvenance},
		{"RunControl", testRunControl},
		{"CheckRuns", testCheckRuns},
		{"SourceLifecycle", testSourceLifecycle},
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

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
	a := &store.Source{ID: "src-a", OrgID: "org1", Name: "repo-a", Provider: "local", RoutingKey: "generic:org1:src-a",
		LocalPath: "/srv/repo-a", VerificationMethod: "hmac_sha256", WebhookSecret: "s3cret", Enabled: true, CreatedAt: at(0)}
	b := &store.Source{ID: "src-b", OrgID: "org1", Name: "repo-b", Provider: "generic", RoutingKey: "generic:org1:src-b",
		VerificationMethod: "none", Enabled: false, CreatedAt: at(1)}
	c := &store.Source{ID: "src-c", OrgID: "org2", Name: "repo-a", Provider: "generic", Enabled: true, CreatedAt: at(-1)}
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

	err = s.CreateSource(ctx, &store.Source{ID: "src-d", OrgID: "org1", Name: "repo-a", Provider: "generic", CreatedAt: at(5)})
	wantErr(t, "CreateSource duplicate (org, name)", err, store.ErrConflict)
	err = s.CreateSource(ctx, &store.Source{ID: "src-a", OrgID: "org3", Name: "other", Provider: "generic", CreatedAt: at(5)})
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

	d := &store.Source{ID: "src-default", OrgID: "org9", Name: "x", Provider: "generic"}
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
}

// ---------------------------------------------------------------- runs & jobs

func fullRun(id string, created time.Time) *store.Run {
	return &store.Run{ID: id, WorkflowName: "ci", Status: "pending", Provider: "local", RepoIdentifier: "org/repo",
		RepoURL: "file:///srv/repo", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567",
		DeliveryID: "generic:o:s:1", SourceID: "src", OrgID: "org", TriggeredBy: "alice", TimeoutMs: 3_600_000,
		TriggerType: "pull_request", TargetBranch: "main", TrustTier: store.TrustUnknown, LockFileSource: "base",
		CreatedAt: created}
}

func testRunRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	run := fullRun("run-1", at(0))
	run.FailureReason = "preset"
	run.StartedAt = ptime(at(1))
	run.CompletedAt = ptime(at(2))
	run.DurationMs = pint64(1000)
	jobs := []*store.Job{
		{ID: "job-z", JobName: "zeta", BaseJobName: "zeta", Status: "queued", AgentID: "agent-1",
			Config:       json.RawMessage(`{"steps":[{"run":"echo hi"}],"timeout":"5m"}`),
			RunsOnLabels: []string{"linux", "docker"}, MatrixValues: map[string]string{"go": "1.22", "os": "linux"},
			Needs:        []store.Need{{Upstream: "alpha", RunOn: []string{"success"}}, {Upstream: "beta (1)", RunOn: []string{}}, {Upstream: "gamma"}},
			ErrorMessage: "boom", PendingReason: "no agent online", TimeoutMs: 60_000, CreatedAt: at(0),
			StartedAt: ptime(at(3)), CompletedAt: ptime(at(4)), DurationMs: pint64(1000), LastHeartbeatAt: ptime(at(5))},
		{ID: "job-a", JobName: "alpha", BaseJobName: "alpha", RunsOnLabels: []string{}, MatrixValues: map[string]string{},
			Needs: []store.Need{}, CreatedAt: at(0)},
		{ID: "job-m", JobName: "mu", BaseJobName: "mu"},
	}
	must(t, s.CreateRun(ctx, run, jobs))
	got, err := s.GetRun(ctx, run.ID)
	must(t, err)
	same(t, "GetRun", run, got)

	// Defaults written back.
	if jobs[1].Status != "pending" || jobs[2].Status != "pending" {
		t.Errorf("job default status: %q %q", jobs[1].Status, jobs[2].Status)
	}
	for _, j := range jobs {
		if j.RunID != run.ID {
			t.Errorf("job %s RunID = %q", j.ID, j.RunID)
		}
	}
	if !jobs[2].CreatedAt.Equal(run.CreatedAt) {
		t.Errorf("job default CreatedAt = %v, want run's %v", jobs[2].CreatedAt, run.CreatedAt)
	}

	list, err := s.ListJobs(ctx, run.ID)
	must(t, err)
	same(t, "ListJobs (creation order, all fields)", jobs, list)
	for _, j := range jobs {
		g, err := s.GetJob(ctx, j.ID)
		must(t, err)
		same(t, "GetJob "+j.ID, j, g)
	}
	// nil vs empty kept apart.
	g, _ := s.GetJob(ctx, "job-m")
	if g.RunsOnLabels != nil || g.MatrixValues != nil || g.Needs != nil || g.Config != nil {
		t.Errorf("nil JSON fields came back non-nil: %+v", g)
	}
	g, _ = s.GetJob(ctx, "job-a")
	if g.RunsOnLabels == nil || g.MatrixValues == nil || g.Needs == nil {
		t.Errorf("empty JSON fields came back nil: %+v", g)
	}

	_, err = s.GetRun(ctx, "missing")
	wantErr(t, "GetRun unknown", err, store.ErrNotFound)
	_, err = s.GetJob(ctx, "missing")
	wantErr(t, "GetJob unknown", err, store.ErrNotFound)
	empty, err := s.ListJobs(ctx, "missing")
	must(t, err)
	if len(empty) != 0 {
		t.Errorf("ListJobs unknown run: %d", len(empty))
	}

	// A run without jobs, with defaults.
	r2 := &store.Run{ID: "run-2", WorkflowName: "nightly", OrgID: "org"}
	must(t, s.CreateRun(ctx, r2, nil))
	if r2.Status != "pending" || r2.CreatedAt.IsZero() {
		t.Errorf("run defaults: status %q createdAt %v", r2.Status, r2.CreatedAt)
	}
	got, err = s.GetRun(ctx, r2.ID)
	must(t, err)
	same(t, "GetRun defaults", r2, got)
}

func testCreateRunAtomic(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Duplicate job id inside one CreateRun.
	err := s.CreateRun(ctx, fullRun("run-bad", at(0)), []*store.Job{
		{ID: "dup", JobName: "a"}, {ID: "ok", JobName: "b"}, {ID: "dup", JobName: "c"},
	})
	if err == nil {
		t.Fatal("CreateRun with a duplicate job id succeeded")
	}
	wantErr(t, "CreateRun duplicate job id", err, store.ErrConflict)
	_, err = s.GetRun(ctx, "run-bad")
	wantErr(t, "run row after failed CreateRun", err, store.ErrNotFound)
	for _, id := range []string{"dup", "ok"} {
		_, err = s.GetJob(ctx, id)
		wantErr(t, "job row after failed CreateRun", err, store.ErrNotFound)
	}
	n, total, err := s.ListRuns(ctx, store.RunFilter{})
	must(t, err)
	if total != 0 || len(n) != 0 {
		t.Errorf("ListRuns after failed CreateRun: %d rows, total %d", len(n), total)
	}

	// Job id colliding with an existing run's job.
	must(t, s.CreateRun(ctx, fullRun("run-1", at(0)), []*store.Job{{ID: "j1", JobName: "a"}}))
	err = s.CreateRun(ctx, fullRun("run-2", at(1)), []*store.Job{{ID: "j2", JobName: "a"}, {ID: "j1", JobName: "b"}})
	wantErr(t, "CreateRun colliding job id", err, store.ErrConflict)
	_, err = s.GetRun(ctx, "run-2")
	wantErr(t, "run-2 after failed CreateRun", err, store.ErrNotFound)
	_, err = s.GetJob(ctx, "j2")
	wantErr(t, "j2 after failed CreateRun", err, store.ErrNotFound)
	j1, err := s.GetJob(ctx, "j1")
	must(t, err)
	if j1.RunID != "run-1" {
		t.Errorf("j1 moved to run %q", j1.RunID)
	}

	// Duplicate run id.
	err = s.CreateRun(ctx, fullRun("run-1", at(2)), []*store.Job{{ID: "j3", JobName: "a"}})
	wantErr(t, "CreateRun duplicate run id", err, store.ErrConflict)
	_, err = s.GetJob(ctx, "j3")
	wantErr(t, "j3 after failed CreateRun", err, store.ErrNotFound)
	jobs, err := s.ListJobs(ctx, "run-1")
	must(t, err)
	same(t, "run-1 jobs", []string{"j1"}, ids(jobs, func(x *store.Job) string { return x.ID }))
}

func testRunTransitions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), nil))

	ok, err := s.UpdateRunStatus(ctx, "r", []string{"running"}, "success", store.RunUpdate{})
	wantChanged(t, "pending→success with from=[running]", ok, err, false)
	ok, err = s.UpdateRunStatus(ctx, "r", []string{"pending"}, "running", store.RunUpdate{StartedAt: ptime(at(1))})
	wantChanged(t, "pending→running", ok, err, true)
	got, _ := s.GetRun(ctx, "r")
	if got.Status != "running" || got.StartedAt == nil || !got.StartedAt.Equal(at(1)) {
		t.Errorf("after start: %+v", got)
	}
	// Replay is a no-op.
	ok, err = s.UpdateRunStatus(ctx, "r", []string{"pending"}, "running", store.RunUpdate{StartedAt: ptime(at(9))})
	wantChanged(t, "replayed pending→running", ok, err, false)

	// FailureReason set once, never clobbered.
	ok, err = s.UpdateRunStatus(ctx, "r", nil, "cancelling", store.RunUpdate{FailureReason: pstr("cancelled by bob")})
	wantChanged(t, "running→cancelling (nil from)", ok, err, true)
	ok, err = s.UpdateRunStatus(ctx, "r", nil, "failed", store.RunUpdate{FailureReason: pstr("Failed jobs: a"),
		CompletedAt: ptime(at(4)), DurationMs: pint64(3000)})
	wantChanged(t, "cancelling→failed (nil from)", ok, err, true)
	got, _ = s.GetRun(ctx, "r")
	want := fullRun("r", at(0))
	want.Status, want.FailureReason = "failed", "cancelled by bob"
	want.StartedAt, want.CompletedAt, want.DurationMs = ptime(at(1)), ptime(at(4)), pint64(3000)
	same(t, "run after failure", want, got)

	// Terminal is immutable for nil from.
	for _, to := range []string{"running", "success", "cancelled"} {
		ok, err = s.UpdateRunStatus(ctx, "r", nil, to, store.RunUpdate{FailureReason: pstr("x"), CompletedAt: ptime(at(99))})
		wantChanged(t, "terminal failed→"+to+" (nil from)", ok, err, false)
	}
	got, _ = s.GetRun(ctx, "r")
	same(t, "terminal run untouched", want, got)

	// An explicit from naming the terminal status is honoured.
	ok, err = s.UpdateRunStatus(ctx, "r", []string{"failed"}, "success", store.RunUpdate{})
	wantChanged(t, "explicit failed→success", ok, err, true)

	// FailureReason on a run without one is written; nil leaves it.
	must(t, s.CreateRun(ctx, fullRun("r2", at(0)), nil))
	ok, err = s.UpdateRunStatus(ctx, "r2", []string{"pending"}, "running", store.RunUpdate{})
	wantChanged(t, "r2 start", ok, err, true)
	ok, err = s.UpdateRunStatus(ctx, "r2", []string{"running"}, "failed", store.RunUpdate{FailureReason: pstr("Failed jobs: build")})
	wantChanged(t, "r2 fail", ok, err, true)
	got, _ = s.GetRun(ctx, "r2")
	if got.FailureReason != "Failed jobs: build" || got.StartedAt != nil {
		t.Errorf("r2: reason %q startedAt %v", got.FailureReason, got.StartedAt)
	}

	ok, err = s.UpdateRunStatus(ctx, "missing", nil, "running", store.RunUpdate{})
	wantChanged(t, "unknown run", ok, err, false)
}

func testJobTransitions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{{ID: "j", JobName: "build", RunsOnLabels: []string{"linux"}}}))

	ok, err := s.UpdateJobStatus(ctx, "j", []string{"queued"}, "running", store.JobUpdate{})
	wantChanged(t, "pending→running with from=[queued]", ok, err, false)
	ok, err = s.UpdateJobStatus(ctx, "j", []string{"pending"}, "queued", store.JobUpdate{PendingReason: pstr("no agent online")})
	wantChanged(t, "pending→queued", ok, err, true)
	ok, err = s.UpdateJobStatus(ctx, "j", []string{"queued"}, "queued", store.JobUpdate{PendingReason: pstr("all matching agents busy")})
	wantChanged(t, "queued→queued reason", ok, err, true)

	wantErr(t, "heartbeat of queued job", s.TouchJobHeartbeat(ctx, "j", at(2)), store.ErrNotFound)
	ok, err = s.UpdateJobStatus(ctx, "j", []string{"pending", "queued", "recovering"}, "running", store.JobUpdate{
		AgentID: pstr("agent-7"), StartedAt: ptime(at(1)), LastHeartbeatAt: ptime(at(1))})
	wantChanged(t, "queued→running", ok, err, true)
	must(t, s.TouchJobHeartbeat(ctx, "j", at(3)))
	got, _ := s.GetJob(ctx, "j")
	if got.LastHeartbeatAt == nil || !got.LastHeartbeatAt.Equal(at(3)) {
		t.Errorf("heartbeat = %v", got.LastHeartbeatAt)
	}
	wantErr(t, "heartbeat of unknown job", s.TouchJobHeartbeat(ctx, "missing", at(3)), store.ErrNotFound)

	ok, err = s.UpdateJobStatus(ctx, "j", nil, "failed", store.JobUpdate{ErrorMessage: pstr("exit 1"),
		CompletedAt: ptime(at(5)), DurationMs: pint64(4000)})
	wantChanged(t, "running→failed (nil from)", ok, err, true)
	want := &store.Job{ID: "j", RunID: "r", JobName: "build", Status: "failed", AgentID: "agent-7",
		RunsOnLabels: []string{"linux"}, ErrorMessage: "exit 1", PendingReason: "all matching agents busy",
		CreatedAt: at(0), StartedAt: ptime(at(1)), CompletedAt: ptime(at(5)), DurationMs: pint64(4000),
		LastHeartbeatAt: ptime(at(3))}
	got, _ = s.GetJob(ctx, "j")
	same(t, "job after failure", want, got)

	for _, to := range []string{"running", "success", "cancelled", "timed_out_stale"} {
		ok, err = s.UpdateJobStatus(ctx, "j", nil, to, store.JobUpdate{ErrorMessage: pstr("late"), AgentID: pstr("other")})
		wantChanged(t, "terminal failed→"+to+" (nil from)", ok, err, false)
	}
	wantErr(t, "heartbeat of failed job", s.TouchJobHeartbeat(ctx, "j", at(9)), store.ErrNotFound)
	got, _ = s.GetJob(ctx, "j")
	same(t, "terminal job untouched", want, got)

	// Every terminal job status is immutable under nil from.
	var jobs []*store.Job
	for i, st := range store.TerminalJobStatuses {
		jobs = append(jobs, &store.Job{ID: fmt.Sprintf("t%d", i), JobName: st, Status: st})
	}
	must(t, s.CreateRun(ctx, fullRun("r2", at(1)), jobs))
	for _, j := range jobs {
		ok, err = s.UpdateJobStatus(ctx, j.ID, nil, "queued", store.JobUpdate{})
		wantChanged(t, "terminal "+j.Status+"→queued", ok, err, false)
	}
	// Every non-terminal status moves under nil from.
	var live []*store.Job
	for i, st := range []string{"pending", "queued", "running", "recovering", "cancelling"} {
		live = append(live, &store.Job{ID: fmt.Sprintf("n%d", i), JobName: st, Status: st})
	}
	must(t, s.CreateRun(ctx, fullRun("r3", at(2)), live))
	for _, j := range live {
		ok, err = s.UpdateJobStatus(ctx, j.ID, nil, "cancelled", store.JobUpdate{})
		wantChanged(t, "non-terminal "+j.Status+"→cancelled", ok, err, true)
	}
	ok, err = s.UpdateJobStatus(ctx, "missing", nil, "running", store.JobUpdate{})
	wantChanged(t, "unknown job", ok, err, false)
}

func testListJobsByStatus(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r2", at(10)), []*store.Job{
		{ID: "b1", JobName: "x", Status: "queued"}, {ID: "b2", JobName: "y", Status: "pending"}}))
	must(t, s.CreateRun(ctx, fullRun("r1", at(0)), []*store.Job{
		{ID: "a1", JobName: "x", Status: "running"}, {ID: "a2", JobName: "y", Status: "queued"}, {ID: "a3", JobName: "z", Status: "success"}}))
	got, err := s.ListJobsByStatus(ctx, []string{"queued", "running"})
	must(t, err)
	same(t, "ListJobsByStatus", []string{"a1", "a2", "b1"}, ids(got, func(x *store.Job) string { return x.ID }))
	got, err = s.ListJobsByStatus(ctx, []string{"pending"})
	must(t, err)
	same(t, "ListJobsByStatus pending", []string{"b2"}, ids(got, func(x *store.Job) string { return x.ID }))
	got, err = s.ListJobsByStatus(ctx, []string{"skipped"})
	must(t, err)
	if len(got) != 0 {
		t.Errorf("ListJobsByStatus skipped: %d", len(got))
	}
}

// ---------------------------------------------------------------- steps

func testSteps(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{{ID: "j", JobName: "build"}, {ID: "k", JobName: "other"}}))

	s1 := &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "test", Status: "running", StartedAt: ptime(at(1))}
	s0 := &store.Step{RunID: "r", JobID: "j", StepIndex: 0, StepName: "checkout", Status: "success", ExitCode: pint(0),
		LogBytes: 120, StartedAt: ptime(at(0)), CompletedAt: ptime(at(1)), DurationMs: pint64(1000)}
	must(t, s.UpsertStep(ctx, s1))
	must(t, s.UpsertStep(ctx, s0))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: "pending"}))
	got, err := s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "ListSteps", []*store.Step{s0, s1}, got)

	// running → failed fills the fields and keeps the start.
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 1, Status: "failed", ExitCode: pint(2),
		ErrorMessage: "exit status 2", LogBytes: 4096, CompletedAt: ptime(at(3)), DurationMs: pint64(2000)}))
	want1 := &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "test", Status: "failed", ExitCode: pint(2),
		ErrorMessage: "exit status 2", LogBytes: 4096, StartedAt: ptime(at(1)), CompletedAt: ptime(at(3)), DurationMs: pint64(2000)}
	got, err = s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "step after completion", []*store.Step{s0, want1}, got)

	// A late "running" replay never reverts a terminal step, nor clobbers it.
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "renamed", Status: "running",
		ExitCode: pint(0), ErrorMessage: "other", LogBytes: 10, StartedAt: ptime(at(50))}))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 0, Status: "pending"}))
	got, err = s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "terminal steps after late non-terminal reports", []*store.Step{s0, want1}, got)

	// pending → running → success on another step.
	k := &store.Step{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: "running", StartedAt: ptime(at(4))}
	must(t, s.UpsertStep(ctx, k))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "k", StepIndex: 0, Status: "success", ExitCode: pint(0),
		LogBytes: 7, CompletedAt: ptime(at(5)), DurationMs: pint64(1000)}))
	got, err = s.ListSteps(ctx, "k")
	must(t, err)
	same(t, "k steps", []*store.Step{{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: "success",
		ExitCode: pint(0), LogBytes: 7, StartedAt: ptime(at(4)), CompletedAt: ptime(at(5)), DurationMs: pint64(1000)}}, got)

	none, err := s.ListSteps(ctx, "missing")
	must(t, err)
	if len(none) != 0 {
		t.Errorf("ListSteps unknown job: %d", len(none))
	}
	err = s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "missing", StepIndex: 0, Status: "running"})
	wantErr(t, "UpsertStep unknown job", err, store.ErrNotFound)
}

// ---------------------------------------------------------------- queue

func testQueue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	e1 := &store.QueueEntry{ID: "q1", RunID: "r", JobName: "build", RunsOnLabels: []string{"linux", "docker"},
		ExcludeLabels: []string{"gpu"}, Status: store.QueuePending, CreatedAt: at(0)}
	e2 := &store.QueueEntry{ID: "q2", RunID: "r", JobName: "lint", CreatedAt: at(1)}
	e3 := &store.QueueEntry{ID: "q3", RunID: "r", JobName: "deploy", RunsOnLabels: []string{}, ExcludeLabels: []string{},
		PinnedAgentID: "agent-p", CreatedAt: at(-1)}
	for _, e := range []*store.QueueEntry{e1, e2, e3} {
		must(t, s.Enqueue(ctx, e))
	}
	if e2.Status != store.QueuePending {
		t.Errorf("Enqueue default status %q", e2.Status)
	}
	wantErr(t, "Enqueue duplicate", s.Enqueue(ctx, &store.QueueEntry{ID: "q1", RunID: "x", JobName: "y", CreatedAt: at(5)}), store.ErrConflict)

	all, err := s.ListQueue(ctx, nil)
	must(t, err)
	same(t, "ListQueue all", []*store.QueueEntry{e3, e1, e2}, all)

	// ClaimByID ignores labels and pins; second claim gets nothing.
	deadline := at(10)
	c, err := s.ClaimByID(ctx, "q2", "agent-1", deadline)
	must(t, err)
	want2 := *e2
	want2.Status, want2.AgentID, want2.AckDeadline = store.QueueDispatched, "agent-1", ptime(deadline)
	same(t, "ClaimByID", &want2, c)
	c, err = s.ClaimByID(ctx, "q2", "agent-2", deadline)
	must(t, err)
	if c != nil {
		t.Errorf("second ClaimByID returned %+v", c)
	}
	c, err = s.ClaimByID(ctx, "missing", "agent-2", deadline)
	if err != nil || c != nil {
		t.Errorf("ClaimByID unknown: %v, %v", c, err)
	}

	// Ack: only the owning agent, only while dispatched.
	wantErr(t, "Ack by another agent", s.AckQueueEntry(ctx, "q2", "agent-2"), store.ErrNotFound)
	must(t, s.AckQueueEntry(ctx, "q2", "agent-1"))
	list, err := s.ListQueue(ctx, []string{store.QueueDispatched})
	must(t, err)
	want2.AckDeadline = nil
	same(t, "after ack", []*store.QueueEntry{&want2}, list)
	wantErr(t, "Ack pending entry", s.AckQueueEntry(ctx, "q1", "agent-1"), store.ErrNotFound)

	// Requeue counts attempts and clears the claim.
	n, ok, err := s.RequeueEntry(ctx, "q2")
	must(t, err)
	if !ok || n != 1 {
		t.Errorf("RequeueEntry = %d, %v", n, ok)
	}
	n, ok, err = s.RequeueEntry(ctx, "q2")
	must(t, err)
	if ok || n != 0 {
		t.Errorf("RequeueEntry of a pending entry = %d, %v", n, ok)
	}
	_, _, err = s.RequeueEntry(ctx, "missing")
	must(t, err)
	if _, err := s.ClaimByID(ctx, "q2", "agent-3", deadline); err != nil {
		t.Fatal(err)
	}
	n, ok, err = s.RequeueEntry(ctx, "q2")
	must(t, err)
	if !ok || n != 2 {
		t.Errorf("second RequeueEntry = %d, %v", n, ok)
	}
	list, err = s.ListQueue(ctx, []string{store.QueuePending})
	must(t, err)
	want2 = *e2
	want2.Attempts = 2
	same(t, "pending after requeues", []*store.QueueEntry{e3, e1, &want2}, list)

	// Pin / unpin a pending entry.
	must(t, s.PinQueueEntry(ctx, "q1", "agent-9"))
	c, err = s.ClaimNext(ctx, "agent-1", []string{"linux", "docker"}, deadline)
	must(t, err)
	if c == nil || c.ID != "q2" {
		t.Errorf("ClaimNext with q1 pinned elsewhere = %+v, want q2", c)
	}
	must(t, s.PinQueueEntry(ctx, "q1", ""))
	wantErr(t, "Pin dispatched entry", s.PinQueueEntry(ctx, "q2", "x"), store.ErrNotFound)
	wantErr(t, "Pin unknown entry", s.PinQueueEntry(ctx, "missing", "x"), store.ErrNotFound)

	// SetQueueStatus is conditional; nil from = any non-terminal status.
	ok, err = s.SetQueueStatus(ctx, "q2", []string{store.QueuePending}, store.QueueCompleted)
	wantChanged(t, "dispatched→completed with from=[pending]", ok, err, false)
	ok, err = s.SetQueueStatus(ctx, "q2", []string{store.QueueDispatched}, store.QueueCompleted)
	wantChanged(t, "dispatched→completed", ok, err, true)
	ok, err = s.SetQueueStatus(ctx, "q2", nil, store.QueuePending)
	wantChanged(t, "completed→pending (nil from)", ok, err, false)
	ok, err = s.SetQueueStatus(ctx, "q3", nil, store.QueueExpired)
	wantChanged(t, "pending→expired (nil from)", ok, err, true)
	ok, err = s.SetQueueStatus(ctx, "missing", nil, store.QueueExpired)
	wantChanged(t, "unknown entry", ok, err, false)

	list, err = s.ListQueue(ctx, []string{store.QueueCompleted, store.QueueExpired})
	must(t, err)
	same(t, "ListQueue terminal", []string{"q3", "q2"}, ids(list, func(x *store.QueueEntry) string { return x.ID }))
	list, err = s.ListQueue(ctx, []string{store.QueueFailed})
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListQueue failed: %d", len(list))
	}
}

func testClaimNextMatching(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	dl := at(30)
	claim := func(agent string, labels ...string) string {
		t.Helper()
		e, err := s.ClaimNext(ctx, agent, labels, dl)
		must(t, err)
		if e == nil {
			return ""
		}
		if e.Status != store.QueueDispatched || e.AgentID != agent || e.AckDeadline == nil || !e.AckDeadline.Equal(dl) {
			t.Errorf("claimed entry %s: status %q agent %q deadline %v", e.ID, e.Status, e.AgentID, e.AckDeadline)
		}
		return e.ID
	}
	if id := claim("a"); id != "" {
		t.Fatalf("claim from empty queue = %q", id)
	}
	entries := []*store.QueueEntry{
		{ID: "needs-linux-docker", RunsOnLabels: []string{"linux", "docker"}, CreatedAt: at(0)},
		{ID: "needs-linux-not-gpu", RunsOnLabels: []string{"linux"}, ExcludeLabels: []string{"gpu", "arm64"}, CreatedAt: at(1)},
		{ID: "pinned-to-p", RunsOnLabels: []string{"linux"}, PinnedAgentID: "p", CreatedAt: at(-5)},
		{ID: "anything", CreatedAt: at(3)},
		{ID: "anything-empty", RunsOnLabels: []string{}, ExcludeLabels: []string{}, CreatedAt: at(3)},
	}
	for _, e := range entries {
		e.RunID, e.JobName = "r", e.ID
		must(t, s.Enqueue(ctx, e))
	}
	// Agent with only "docker": nothing needing linux; oldest labelless first,
	// equal created_at in enqueue order.
	if id := claim("x", "docker", "gpu"); id != "anything" {
		t.Errorf("docker,gpu agent got %q, want anything", id)
	}
	if id := claim("x", "docker", "gpu"); id != "anything-empty" {
		t.Errorf("docker,gpu agent got %q, want anything-empty", id)
	}
	if id := claim("x", "docker", "gpu"); id != "" {
		t.Errorf("docker,gpu agent got %q, want nothing", id)
	}
	// Exclude: linux+gpu may take needs-linux-docker only with docker.
	if id := claim("y", "linux", "gpu"); id != "" {
		t.Errorf("linux,gpu agent got %q, want nothing", id)
	}
	// Pin: p takes its pinned entry (oldest) first; others never do.
	if id := claim("q", "linux", "docker", "gpu"); id != "needs-linux-docker" {
		t.Errorf("q agent got %q, want needs-linux-docker", id)
	}
	if id := claim("q", "linux", "docker", "x86_64"); id != "needs-linux-not-gpu" {
		t.Errorf("q agent got %q, want needs-linux-not-gpu", id)
	}
	if id := claim("q", "linux", "docker"); id != "" {
		t.Errorf("q agent got %q, want nothing (pinned to p)", id)
	}
	if id := claim("p", "linux"); id != "pinned-to-p" {
		t.Errorf("p agent got %q, want pinned-to-p", id)
	}
	// A pinned agent still needs the labels.
	must(t, s.Enqueue(ctx, &store.QueueEntry{ID: "pinned-needs-mac", RunsOnLabels: []string{"macos"}, PinnedAgentID: "p", CreatedAt: at(9)}))
	if id := claim("p", "linux"); id != "" {
		t.Errorf("p agent without macos got %q", id)
	}
	if id := claim("p", "macos", "linux"); id != "pinned-needs-mac" {
		t.Errorf("p agent with macos got %q", id)
	}
	// Oldest first across many.
	for i := 5; i >= 1; i-- {
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("o%d", i), RunsOnLabels: []string{"o"}, CreatedAt: at(100 + i)}))
	}
	var order []string
	for id := claim("z", "o"); id != ""; id = claim("z", "o") {
		order = append(order, id)
	}
	same(t, "claim order", []string{"o1", "o2", "o3", "o4", "o5"}, order)
	pending, err := s.ListQueue(ctx, []string{store.QueuePending})
	must(t, err)
	if len(pending) != 0 {
		t.Errorf("left pending: %v", ids(pending, func(x *store.QueueEntry) string { return x.ID }))
	}
}

func testClaimNextConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const workers, perWorker = 20, 10
	for i := 0; i < workers*perWorker; i++ {
		labels := []string{"linux"}
		if i%3 == 0 {
			labels = nil
		}
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("c%03d", i), RunID: "r", JobName: "j",
			RunsOnLabels: labels, CreatedAt: at(i % 7)}))
	}
	var mu sync.Mutex
	claims := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		agent := fmt.Sprintf("agent-%02d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, err := s.ClaimNext(ctx, agent, []string{"linux", "x64"}, at(60))
				if err != nil {
					errs <- err
					return
				}
				if e == nil {
					return
				}
				if e.AgentID != agent {
					errs <- fmt.Errorf("entry %s claimed for %s reports agent %s", e.ID, agent, e.AgentID)
					return
				}
				mu.Lock()
				claims[e.ID] = append(claims[e.ID], agent)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claims) != workers*perWorker {
		t.Errorf("claimed %d distinct entries, want %d", len(claims), workers*perWorker)
	}
	var dups []string
	for id, agents := range claims {
		if len(agents) != 1 {
			dups = append(dups, fmt.Sprintf("%s by %v", id, agents))
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Errorf("entries claimed more than once: %v", dups)
	}
	list, err := s.ListQueue(ctx, []string{store.QueueDispatched})
	must(t, err)
	if len(list) != workers*perWorker {
		t.Errorf("%d dispatched rows, want %d", len(list), workers*perWorker)
	}
	for _, e := range list {
		if a := claims[e.ID]; len(a) != 1 || a[0] != e.AgentID {
			t.Errorf("row %s agent %q, claims %v", e.ID, e.AgentID, a)
		}
	}
}

// ---------------------------------------------------------------- tokens

func testAgentTokens(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	static := &store.AgentToken{ID: "t1", TokenHash: "hash1", Prefix: "kat_0123abcd", Kind: store.AgentTokenStatic,
		Labels: []string{"linux", "gpu"}, CreatedAt: at(0)}
	eph := &store.AgentToken{ID: "t2", TokenHash: "hash2", Prefix: "kat_ffff0000", Kind: store.AgentTokenEphemeral,
		BoundAgentID: "host-1234abcd", ExpiresAt: ptime(at(3600)), CreatedAt: at(1)}
	empty := &store.AgentToken{ID: "t3", TokenHash: "hash3", Prefix: "kat_x", Kind: store.AgentTokenStatic,
		Labels: []string{}, CreatedAt: at(1)}
	for _, tok := range []*store.AgentToken{static, eph, empty} {
		must(t, s.CreateAgentToken(ctx, tok))
	}
	for _, tok := range []*store.AgentToken{static, eph, empty} {
		got, err := s.GetAgentTokenByHash(ctx, tok.TokenHash)
		must(t, err)
		same(t, "GetAgentTokenByHash "+tok.ID, tok, got)
	}
	_, err := s.GetAgentTokenByHash(ctx, "nope")
	wantErr(t, "GetAgentTokenByHash unknown", err, store.ErrNotFound)
	wantErr(t, "CreateAgentToken duplicate hash",
		s.CreateAgentToken(ctx, &store.AgentToken{ID: "t4", TokenHash: "hash1", Kind: store.AgentTokenStatic, CreatedAt: at(2)}), store.ErrConflict)
	wantErr(t, "CreateAgentToken duplicate id",
		s.CreateAgentToken(ctx, &store.AgentToken{ID: "t1", TokenHash: "hash9", Kind: store.AgentTokenStatic, CreatedAt: at(2)}), store.ErrConflict)

	list, err := s.ListAgentTokens(ctx)
	must(t, err)
	same(t, "ListAgentTokens newest first", []string{"t3", "t2", "t1"}, ids(list, func(x *store.AgentToken) string { return x.ID }))

	must(t, s.RevokeAgentToken(ctx, "t1", at(10)))
	must(t, s.RevokeAgentToken(ctx, "t1", at(20)))
	got, err := s.GetAgentTokenByHash(ctx, "hash1")
	must(t, err)
	want := *static
	want.RevokedAt = ptime(at(10))
	same(t, "revoked token (first revocation kept)", &want, got)
	wantErr(t, "RevokeAgentToken unknown", s.RevokeAgentToken(ctx, "missing", at(1)), store.ErrNotFound)
}

func testAdminTokens(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	owner := &store.AdminToken{ID: "a1", Label: "bootstrap", Role: "owner", TokenHash: "h1", CreatedAt: at(0)}
	aud := &store.AdminToken{ID: "a2", Label: "ci bot", Role: "auditor", TokenHash: "h2", ExpiresAt: ptime(at(86400)), CreatedAt: at(5)}
	must(t, s.CreateAdminToken(ctx, owner))
	must(t, s.CreateAdminToken(ctx, aud))
	got, err := s.GetAdminTokenByHash(ctx, "h1")
	must(t, err)
	same(t, "GetAdminTokenByHash", owner, got)
	got, err = s.GetAdminTokenByHash(ctx, "h2")
	must(t, err)
	same(t, "GetAdminTokenByHash expiring", aud, got)
	_, err = s.GetAdminTokenByHash(ctx, "nope")
	wantErr(t, "GetAdminTokenByHash unknown", err, store.ErrNotFound)
	wantErr(t, "CreateAdminToken duplicate hash",
		s.CreateAdminToken(ctx, &store.AdminToken{ID: "a3", Role: "admin", TokenHash: "h1", CreatedAt: at(1)}), store.ErrConflict)

	d := &store.AdminToken{ID: "a4", Label: "defaulted", Role: "admin", TokenHash: "h4"}
	must(t, s.CreateAdminToken(ctx, d))
	if d.CreatedAt.IsZero() {
		t.Error("CreateAdminToken: zero CreatedAt not defaulted")
	}
	list, err := s.ListAdminTokens(ctx)
	must(t, err)
	same(t, "ListAdminTokens newest first", []string{"a4", "a2", "a1"}, ids(list, func(x *store.AdminToken) string { return x.ID }))

	must(t, s.RevokeAdminToken(ctx, "a2"))
	must(t, s.RevokeAdminToken(ctx, "a2"))
	got, err = s.GetAdminTokenByHash(ctx, "h2")
	must(t, err)
	want := *aud
	want.Revoked = true
	same(t, "revoked admin token", &want, got)
	wantErr(t, "RevokeAdminToken unknown", s.RevokeAdminToken(ctx, "missing"), store.ErrNotFound)
}

// ---------------------------------------------------------------- ListRuns

func testListRuns(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// 25 runs: i%3 workflow, i%2 repo, status cycle, two sharing created_at.
	statuses := []string{"pending", "running", "success", "failed", "cancelled"}
	var all []*store.Run
	for i := 0; i < 25; i++ {
		r := fullRun(fmt.Sprintf("run-%02d", i), at(i))
		if i == 24 {
			r.CreatedAt = at(23) // tie with run-23: id decides (desc)
		}
		r.WorkflowName = []string{"ci", "release", "nightly"}[i%3]
		r.RepoIdentifier = []string{"org/a", "org/b"}[i%2]
		r.DeliveryID = fmt.Sprintf("d%d", i/5)
		r.Status = statuses[i%5]
		r.SourceID = []string{"src-a", "src-b", ""}[i%3]
		r.TriggerType = []string{"push", "pull_request"}[i%2]
		// Branch facts: a pushed branch (ref), a pull request's base
		// (target branch), a tag (neither).
		switch i % 4 {
		case 0:
			r.Ref, r.TargetBranch = "refs/heads/main", "main"
		case 1:
			r.Ref, r.TargetBranch = "refs/pull/7/head", "main"
		case 2:
			r.Ref, r.TargetBranch = "refs/heads/feature/x", ""
		case 3:
			r.Ref, r.TargetBranch = "refs/tags/v1", ""
		}
		must(t, s.CreateRun(ctx, r, nil))
		all = append(all, r)
	}
	newest := func(pred func(*store.Run) bool) []string {
		var out []string
		for i := len(all) - 1; i >= 0; i-- {
			if pred(all[i]) {
				out = append(out, all[i].ID)
			}
		}
		if out == nil {
			out = []string{}
		}
		return out
	}
	check := func(name string, f store.RunFilter, pred func(*store.Run) bool) {
		t.Helper()
		want := newest(pred)
		got, total, err := s.ListRuns(ctx, f)
		must(t, err)
		if total != len(want) {
			t.Errorf("%s: total %d, want %d", name, total, len(want))
		}
		lim := f.Limit
		if lim <= 0 {
			lim = 20
		}
		lo, hi := f.Offset, f.Offset+lim
		if lo > len(want) {
			lo = len(want)
		}
		if hi > len(want) {
			hi = len(want)
		}
		same(t, name, want[lo:hi], ids(got, func(x *store.Run) string { return x.ID }))
	}
	check("no filter (default limit 20)", store.RunFilter{}, func(*store.Run) bool { return true })
	check("page 2", store.RunFilter{Limit: 10, Offset: 10}, func(*store.Run) bool { return true })
	check("last page", store.RunFilter{Limit: 10, Offset: 20}, func(*store.Run) bool { return true })
	check("past the end", store.RunFilter{Limit: 10, Offset: 40}, func(*store.Run) bool { return true })
	check("statuses OR", store.RunFilter{Statuses: []string{"failed", "cancelled"}, Limit: 100},
		func(r *store.Run) bool { return r.Status == "failed" || r.Status == "cancelled" })
	check("workflow", store.RunFilter{WorkflowName: "release", Limit: 100}, func(r *store.Run) bool { return r.WorkflowName == "release" })
	check("repo", store.RunFilter{Repo: "org/b", Limit: 3}, func(r *store.Run) bool { return r.RepoIdentifier == "org/b" })
	check("delivery", store.RunFilter{DeliveryID: "d2"}, func(r *store.Run) bool { return r.DeliveryID == "d2" })
	check("source", store.RunFilter{SourceID: "src-b", Limit: 100}, func(r *store.Run) bool { return r.SourceID == "src-b" })
	check("trigger type", store.RunFilter{TriggerType: "pull_request", Limit: 100}, func(r *store.Run) bool { return r.TriggerType == "pull_request" })
	check("branch main (pushed or targeted)", store.RunFilter{Branch: "main", Limit: 100}, func(r *store.Run) bool { return r.TargetBranch == "main" })
	check("branch with a slash", store.RunFilter{Branch: "feature/x", Limit: 100}, func(r *store.Run) bool { return r.Ref == "refs/heads/feature/x" })
	check("branch is not a tag", store.RunFilter{Branch: "v1", Limit: 100}, func(*store.Run) bool { return false })
	check("source and trigger", store.RunFilter{SourceID: "src-a", TriggerType: "push", Limit: 100},
		func(r *store.Run) bool { return r.SourceID == "src-a" && r.TriggerType == "push" })
	since := at(20)
	check("since (strictly later)", store.RunFilter{Since: &since}, func(r *store.Run) bool { return r.CreatedAt.After(since) })
	check("combined", store.RunFilter{Statuses: []string{"pending", "success"}, Repo: "org/a", WorkflowName: "ci", Limit: 100},
		func(r *store.Run) bool {
			return (r.Status == "pending" || r.Status == "success") && r.RepoIdentifier == "org/a" && r.WorkflowName == "ci"
		})
	check("no match", store.RunFilter{WorkflowName: "none"}, func(*store.Run) bool { return false })

	got, _, err := s.ListRuns(ctx, store.RunFilter{Limit: 1})
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("limit 1: %d rows", len(got))
	}
	same(t, "ListRuns full row", all[24], got[0])
}

// ---------------------------------------------------------------- times

func testTimes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	precise := time.Date(2024, 2, 29, 23, 59, 59, 987_654_321, zone)
	run := fullRun("r", precise)
	run.StartedAt = ptime(precise.Add(time.Microsecond))
	must(t, s.CreateRun(ctx, run, nil))
	got, err := s.GetRun(ctx, "r")
	must(t, err)
	wantT := precise.Truncate(time.Millisecond)
	if !got.CreatedAt.Equal(wantT) || !got.StartedAt.Equal(wantT) {
		t.Errorf("times: got %s / %s, want %s", got.CreatedAt.Format(time.RFC3339Nano),
			got.StartedAt.Format(time.RFC3339Nano), wantT.Format(time.RFC3339Nano))
	}
	if got.CreatedAt.Location() != time.UTC || got.StartedAt.Location() != time.UTC {
		t.Errorf("times not UTC: %v / %v", got.CreatedAt.Location(), got.StartedAt.Location())
	}
	must(t, s.CreateAgentToken(ctx, &store.AgentToken{ID: "t", TokenHash: "h", Kind: store.AgentTokenEphemeral,
		ExpiresAt: ptime(precise), CreatedAt: precise}))
	tok, err := s.GetAgentTokenByHash(ctx, "h")
	must(t, err)
	if !tok.ExpiresAt.Equal(wantT) || tok.ExpiresAt.Location() != time.UTC {
		t.Errorf("token expiresAt %v", tok.ExpiresAt)
	}
	// Times before the epoch and far in the future survive too.
	for i, ts := range []time.Time{time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC), time.Date(2999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)} {
		id := fmt.Sprintf("e%d", i)
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: id, CreatedAt: ts, AckDeadline: ptime(ts)}))
		list, err := s.ListQueue(ctx, nil)
		must(t, err)
		for _, e := range list {
			if e.ID == id && (!e.CreatedAt.Equal(ts) || !e.AckDeadline.Equal(ts)) {
				t.Errorf("queue time %s came back %s", ts, e.CreatedAt)
			}
		}
	}
}
