package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

func testContexts(t *testing.T, s store.Store) {
	ctx := context.Background()
	wait, hold := int64(30), int64(600)
	trusted := "trusted"
	c := &store.Context{OrgID: "acme", Name: "release", Type: store.ContextTypeFixed, Enabled: true,
		BranchRestrictions: []string{"main", "release/*"}, RequiredReviewers: []string{"alice"},
		WaitTimerSeconds: &wait, HoldExpirySeconds: &hold, MinimumTrust: &trusted, CreatedBy: "tok-1"}
	created, err := s.UpsertContext(ctx, c, nil)
	if err != nil || !created || c.ID == "" {
		t.Fatalf("create: %v %v %q", created, err, c.ID)
	}
	got, err := s.GetContext(ctx, "acme", "release")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || !got.Enabled || !reflect.DeepEqual(got.BranchRestrictions, []string{"main", "release/*"}) ||
		!reflect.DeepEqual(got.RequiredReviewers, []string{"alice"}) || got.WaitTimerSeconds == nil || *got.WaitTimerSeconds != 30 ||
		got.HoldExpirySeconds == nil || *got.HoldExpirySeconds != 600 || got.MinimumTrust == nil || *got.MinimumTrust != "trusted" ||
		got.CreatedBy != "tok-1" || got.CreatedAt.IsZero() {
		t.Fatalf("stored context: %+v", got)
	}
	// Same name in another org is a different context.
	if _, err := s.GetContext(ctx, "other", "release"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}

	// Upsert of an existing name keeps the id and replaces the fields;
	// vars are seeded unlocked.
	again := &store.Context{OrgID: "acme", Name: "release", Type: store.ContextTypeGlob, GlobPattern: "rel*", Enabled: false, CreatedBy: "tok-2"}
	created, err = s.UpsertContext(ctx, again, map[string]string{"REGION": "eu"})
	if err != nil || created || again.ID != c.ID {
		t.Fatalf("upsert existing: %v %v %q want id %q", created, err, again.ID, c.ID)
	}
	got, _ = s.GetContext(ctx, "acme", "release")
	if got.Type != apitypes.ContextTypeGlob || got.GlobPattern != "rel*" || got.Enabled || got.RequiredReviewers != nil ||
		got.WaitTimerSeconds != nil || got.MinimumTrust != nil || len(got.BranchRestrictions) != 0 || got.BranchRestrictions == nil ||
		got.CreatedBy != "tok-1" {
		t.Fatalf("after upsert: %+v", got)
	}

	// Policy update changes policy fields only; nil clears.
	if err := s.UpdateContextPolicy(ctx, "acme", "release", func(c *store.Context) error {
		c.RequiredReviewers = []string{"bob", "carol"}
		c.Enabled = true
		c.Type = apitypes.ContextTypeFixed // not a policy field: ignored
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A failing mutate changes nothing and its error comes back.
	boom := errors.New("boom")
	if err := s.UpdateContextPolicy(ctx, "acme", "release", func(c *store.Context) error {
		c.RequiredReviewers = nil
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("mutate error: %v", err)
	}
	got2, _ := s.GetContext(ctx, "acme", "release")
	if !got2.Enabled || !reflect.DeepEqual(got2.RequiredReviewers, []string{"bob", "carol"}) || got2.Type != apitypes.ContextTypeGlob {
		t.Fatalf("after policy: %+v", got2)
	}
	if err := s.UpdateContextPolicy(ctx, "acme", "nope", func(*store.Context) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("policy unknown: %v", err)
	}

	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "alpha", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListContexts(ctx, "acme")
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "release" {
		t.Fatalf("list: %v %v", list, err)
	}

	// Bindings: identical binding is not duplicated.
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "**"); err != nil || !ok {
		t.Fatalf("bind: %v %v", ok, err)
	}
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "**"); err != nil || ok {
		t.Fatalf("bind again: %v %v", ok, err)
	}
	if ok, err := s.BindContext(ctx, "acme", "release", "release/*", "host-a"); err != nil || !ok {
		t.Fatalf("bind other host: %v %v", ok, err)
	}
	if _, err := s.BindContext(ctx, "acme", "nope", "x", "**"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bind unknown: %v", err)
	}
	bs, err := s.ListContextBindings(ctx, "acme", "release")
	if err != nil || len(bs) != 2 || bs[0].HostPattern != "**" || bs[1].HostPattern != "host-a" {
		t.Fatalf("bindings: %v %v", bs, err)
	}

	// Variables.
	if err := s.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "A", Value: "1", Locked: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutContextVariable(ctx, "acme", "nope", &store.ContextVariable{Key: "A", Value: "1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("put on unknown context: %v", err)
	}
	vs, err := s.ListContextVariables(ctx, "acme", "release")
	if err != nil || len(vs) != 2 || vs[0].Key != "A" || !vs[0].Locked || vs[1].Key != "REGION" || vs[1].Value != "eu" || vs[1].Locked {
		t.Fatalf("variables: %+v %v", vs, err)
	}
	if err := s.PutContextVariable(ctx, "acme", "release", &store.ContextVariable{Key: "A", Value: "2"}); err != nil {
		t.Fatal(err)
	}
	vs, _ = s.ListContextVariables(ctx, "acme", "release")
	if vs[0].Value != "2" || vs[0].Locked {
		t.Fatalf("replaced variable: %+v", vs[0])
	}
	if err := s.DeleteContextVariable(ctx, "acme", "release", "A"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContextVariable(ctx, "acme", "release", "A"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete missing variable: %v", err)
	}
	if _, err := s.ListContextVariables(ctx, "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("variables of unknown context: %v", err)
	}

	// Delete cascades: re-creating the name starts empty.
	if err := s.DeleteContext(ctx, "acme", "release"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContext(ctx, "acme", "release"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "release", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	if vs, err := s.ListContextVariables(ctx, "acme", "release"); err != nil || len(vs) != 0 {
		t.Fatalf("variables survived delete: %v %v", vs, err)
	}
	if bs, err := s.ListContextBindings(ctx, "acme", "release"); err != nil || len(bs) != 0 {
		t.Fatalf("bindings survived delete: %v %v", bs, err)
	}
}

// testContextGateFields checks the trigger, repository and untrusted-run
// gate fields: defaults, round trip through upsert and policy update, and
// nil lists stored as empty ones.
func testContextGateFields(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	c := &store.Context{OrgID: "acme", Name: "deploy", Type: store.ContextTypeFixed, Enabled: true}
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetContext(ctx, "acme", "deploy")
	must(t, err)
	if got.TriggerTypeFilters == nil || len(got.TriggerTypeFilters) != 0 || got.RepoPatterns == nil || len(got.RepoPatterns) != 0 ||
		got.AllowUntrusted {
		t.Fatalf("defaults: filters=%#v repos=%#v untrusted=%v", got.TriggerTypeFilters, got.RepoPatterns, got.AllowUntrusted)
	}

	c.TriggerTypeFilters = []string{"push", "manual"}
	c.RepoPatterns = []string{"acme/*"}
	c.AllowUntrusted = true
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetContext(ctx, "acme", "deploy")
	must(t, err)
	same(t, "gate fields after upsert", []any{[]string{"push", "manual"}, []string{"acme/*"}, true},
		[]any{got.TriggerTypeFilters, got.RepoPatterns, got.AllowUntrusted})

	// They are policy fields: UpdateContextPolicy writes them.
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.TriggerTypeFilters = nil
		c.RepoPatterns = []string{"acme/api", "acme/web"}
		c.AllowUntrusted = false
		return nil
	}))
	list, err := s.ListContexts(ctx, "acme")
	must(t, err)
	if len(list) != 1 {
		t.Fatalf("list: %d contexts", len(list))
	}
	same(t, "gate fields after policy update", []any{[]string{}, []string{"acme/api", "acme/web"}, false},
		[]any{list[0].TriggerTypeFilters, list[0].RepoPatterns, list[0].AllowUntrusted})
}

// testContextSourceOverrides checks the per-source override CRUD, its
// ErrNotFound cases and the cascade with the context.
func testContextSourceOverrides(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "release", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	put := func(rk, key, value string) *store.ContextSourceOverride {
		t.Helper()
		o := &store.ContextSourceOverride{RoutingKey: rk, Key: key, Value: value}
		must(t, s.PutContextSourceOverride(ctx, "acme", "release", o))
		if o.UpdatedAt.IsZero() {
			t.Fatalf("override %s/%s: UpdatedAt not set", rk, key)
		}
		return o
	}
	b2 := put("generic:acme:b", "REGION", "us")
	a1 := put("generic:acme:a", "REGION", "eu")
	a2 := put("generic:acme:a", "API", "x")
	all, err := s.ListContextSourceOverrides(ctx, "acme", "release", "")
	must(t, err)
	same(t, "all overrides (routing key, key order)", []*store.ContextSourceOverride{a2, a1, b2}, all)
	onlyA, err := s.ListContextSourceOverrides(ctx, "acme", "release", "generic:acme:a")
	must(t, err)
	same(t, "overrides of one routing key", []*store.ContextSourceOverride{a2, a1}, onlyA)

	// Put replaces.
	a1 = put("generic:acme:a", "REGION", "ap")
	onlyA, err = s.ListContextSourceOverrides(ctx, "acme", "release", "generic:acme:a")
	must(t, err)
	same(t, "replaced override", []*store.ContextSourceOverride{a2, a1}, onlyA)

	must(t, s.DeleteContextSourceOverride(ctx, "acme", "release", "generic:acme:a", "API"))
	wantErr(t, "delete missing override", s.DeleteContextSourceOverride(ctx, "acme", "release", "generic:acme:a", "API"), store.ErrNotFound)
	wantErr(t, "delete on unknown context", s.DeleteContextSourceOverride(ctx, "acme", "nope", "generic:acme:b", "REGION"), store.ErrNotFound)
	wantErr(t, "put on unknown context", s.PutContextSourceOverride(ctx, "other", "release", &store.ContextSourceOverride{RoutingKey: "k", Key: "K"}), store.ErrNotFound)
	_, err = s.ListContextSourceOverrides(ctx, "acme", "nope", "")
	wantErr(t, "list on unknown context", err, store.ErrNotFound)
	none, err := s.ListContextSourceOverrides(ctx, "acme", "release", "generic:acme:zzz")
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("overrides of an unknown routing key: %v", none)
	}

	// Overrides cascade with the context.
	must(t, s.DeleteContext(ctx, "acme", "release"))
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "release", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	all, err = s.ListContextSourceOverrides(ctx, "acme", "release", "")
	must(t, err)
	if len(all) != 0 {
		t.Fatalf("overrides survived delete: %v", all)
	}
}

// testContextDeleteBlockedByHolds checks that pending holds naming a
// context (in the same org) block its deletion, and that resolved holds
// keep the context name as history.
func testContextDeleteBlockedByHolds(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, org := range []string{"acme", "other"} {
		if _, err := s.UpsertContext(ctx, &store.Context{OrgID: org, Name: "release", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
			t.Fatal(err)
		}
	}
	must(t, s.CreateRun(ctx, fullRun("r1", at(0)), nil))
	mkHold := func(org string, contexts ...string) *store.HeldRun {
		t.Helper()
		h := &store.HeldRun{OrgID: org, RunID: "r1", HoldType: hold.Reviewer, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeWorkflow, Reason: "needs review", Contexts: contexts, ExpiresAt: at(3600)}
		ok, err := s.CreateHeldRun(ctx, h, nil)
		if err != nil || !ok {
			t.Fatalf("create hold: %v %v", ok, err)
		}
		return h
	}
	h1 := mkHold("acme", "release", "staging")
	h2 := mkHold("acme", "release")
	mkHold("other", "release")   // another org's hold does not count
	mkHold("acme", "release-eu") // nor does another name

	if n, err := s.CountPendingHeldRunsForContext(ctx, "acme", "release"); err != nil || n != 2 {
		t.Fatalf("count pending: %d %v", n, err)
	}
	err := s.DeleteContext(ctx, "acme", "release")
	var pe *store.PendingHeldRunsError
	if !errors.As(err, &pe) || pe.Context != "release" || pe.Count != 2 || !store.IsPendingHeldRuns(err) {
		t.Fatalf("delete with pending holds: %v", err)
	}
	if _, err := s.GetContext(ctx, "acme", "release"); err != nil {
		t.Fatalf("blocked delete removed the context: %v", err)
	}
	// An unknown context is still not found, holds or not.
	wantErr(t, "delete unknown context", s.DeleteContext(ctx, "acme", "staging"), store.ErrNotFound)

	for _, h := range []*store.HeldRun{h1, h2} {
		ok, err := s.DecideHeldRun(ctx, h.ID, nil, nil, hold.Rejected, "alice", "no", at(10))
		wantChanged(t, "reject "+h.ID, ok, err, true)
	}
	if n, err := s.CountPendingHeldRunsForContext(ctx, "acme", "release"); err != nil || n != 0 {
		t.Fatalf("count after resolution: %d %v", n, err)
	}
	must(t, s.DeleteContext(ctx, "acme", "release"))
	got, err := s.GetHeldRun(ctx, h1.ID)
	must(t, err)
	same(t, "context names kept as history", []string{"release", "staging"}, got.Contexts)
	// The other org's context is untouched and still blocked.
	if err := s.DeleteContext(ctx, "other", "release"); !store.IsPendingHeldRuns(err) {
		t.Fatalf("other org delete: %v", err)
	}
}

// testContextConcurrencyLimit checks that the concurrency limit round-trips
// through upsert, get, list and policy update, with nil for no limit.
func testContextConcurrencyLimit(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	limit := func(name string) *int64 {
		t.Helper()
		c, err := s.GetContext(ctx, "acme", name)
		must(t, err)
		return c.ConcurrencyLimit
	}
	if _, err := s.UpsertContext(ctx, &store.Context{OrgID: "acme", Name: "open", Type: apitypes.ContextTypeFixed, Enabled: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := limit("open"); got != nil {
		t.Fatalf("default limit: %d, want nil", *got)
	}
	c := &store.Context{OrgID: "acme", Name: "deploy", Type: apitypes.ContextTypeFixed, Enabled: true, ConcurrencyLimit: pint64(2)}
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	same(t, "limit after create", pint64(2), limit("deploy"))
	c.ConcurrencyLimit = pint64(5)
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	same(t, "limit after upsert", pint64(5), limit("deploy"))

	// A policy update that touches another field keeps the limit.
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.AllowUntrusted = true
		return nil
	}))
	same(t, "limit kept by an unrelated policy update", pint64(5), limit("deploy"))
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.ConcurrencyLimit = pint64(1)
		return nil
	}))
	list, err := s.ListContexts(ctx, "acme")
	must(t, err)
	if len(list) != 2 || list[0].Name != "deploy" || list[1].Name != "open" {
		t.Fatalf("list: %+v", list)
	}
	same(t, "listed limits", []*int64{pint64(1), nil}, []*int64{list[0].ConcurrencyLimit, list[1].ConcurrencyLimit})

	// nil clears.
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.ConcurrencyLimit = nil
		return nil
	}))
	if got := limit("deploy"); got != nil {
		t.Fatalf("cleared limit: %d", *got)
	}
}

// slotJobsRun creates run id with queued jobs of the given ids.
func slotJobsRun(t *testing.T, s store.Store, id string, jobIDs ...string) {
	t.Helper()
	jobs := make([]*store.Job, len(jobIDs))
	for i, j := range jobIDs {
		jobs[i] = &store.Job{ID: j, JobName: j, BaseJobName: j, Status: status.JobQueued}
	}
	must(t, s.CreateRun(ctxT(t), fullRun(id, at(0)), jobs))
}

// testContextSlots checks AcquireContextSlots on one group: the limit, idempotent
// re-acquisition, terminal and held jobs not counting, and independence of
// groups and orgs.
func testContextSlots(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	slotJobsRun(t, s, "r", "j1", "j2", "j3", "j4")
	acquire := func(org, grp, job string, limit int, want bool) {
		t.Helper()
		ok, err := s.AcquireContextSlots(ctx, org, job, map[string]int{grp: limit}, at(1))
		if err != nil {
			t.Fatalf("acquire %s/%s for %s: %v", org, grp, job, err)
		}
		if ok != want {
			t.Fatalf("acquire %s/%s for %s (limit %d) = %v, want %v", org, grp, job, limit, ok, want)
		}
	}
	acquire("acme", "deploy", "j1", 1, true)
	acquire("acme", "deploy", "j2", 1, false)
	holders := func(org, grp string, want ...string) {
		t.Helper()
		got, err := s.ContextSlotRuns(ctx, org, grp)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ContextSlotRuns(%s, %s) = %v, %v; want %v", org, grp, got, err, want)
		}
	}
	holders("acme", "deploy", "r")
	holders("acme", "staging")
	holders("other", "deploy")
	// Re-acquiring a held slot succeeds without taking a second one.
	acquire("acme", "deploy", "j1", 1, true)
	acquire("acme", "deploy", "j2", 1, false)
	// With room for two, j2 fits; the idempotent j1 did not count twice.
	acquire("acme", "deploy", "j2", 2, true)
	acquire("acme", "deploy", "j3", 2, false)

	// Other groups and other orgs have their own slots.
	acquire("acme", "staging", "j3", 1, true)
	acquire("other", "deploy", "j4", 1, true)
	acquire("acme", "staging", "j4", 1, false)

	// A finished job frees its slot.
	ok, err := s.UpdateJobStatus(ctx, "j1", nil, status.JobSuccess, store.JobUpdate{})
	wantChanged(t, "finish j1", ok, err, true)
	acquire("acme", "deploy", "j3", 2, true)
	acquire("acme", "deploy", "j4", 2, false)

	// A slot counts until its job ends, also while the job is held (a job
	// given a slot while held is about to be released).
	ok, err = s.UpdateJobStatus(ctx, "j2", nil, status.JobHeld, store.JobUpdate{})
	wantChanged(t, "hold j2", ok, err, true)
	acquire("acme", "deploy", "j4", 2, false)
	ok, err = s.UpdateJobStatus(ctx, "j2", nil, status.JobCancelled, store.JobUpdate{})
	wantChanged(t, "cancel j2", ok, err, true)
	acquire("acme", "deploy", "j4", 2, true)
	acquire("acme", "staging", "j1", 1, false) // j3 still holds staging
	ok, err = s.UpdateJobStatus(ctx, "j3", nil, status.JobCancelled, store.JobUpdate{})
	wantChanged(t, "cancel j3", ok, err, true)
	holders("acme", "staging") // a terminal job holds nothing
	acquire("acme", "staging", "j4", 1, true)
	holders("acme", "staging", "r")
}

// testContextSlotsConcurrent races ten jobs for three slots of a group:
// exactly three win.
func testContextSlotsConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n, limit = 10, 3
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%d", i)
	}
	slotJobsRun(t, s, "r", ids...)
	var wg sync.WaitGroup
	wins := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			wins[i], errs[i] = s.AcquireContextSlots(ctx, "acme", ids[i], map[string]int{"deploy": limit, "other": n}, at(i))
		}(i)
	}
	close(start)
	wg.Wait()
	won := 0
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("acquirer %d: %v", i, errs[i])
		}
		if wins[i] {
			won++
		}
	}
	if won != limit {
		t.Fatalf("%d of %d acquirers took a slot, want %d", won, n, limit)
	}
}

// testContextSlotsAllOrNone checks that a job needing slots of several
// groups takes all of them or none: a full group leaves the others
// untouched.
func testContextSlotsAllOrNone(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	slotJobsRun(t, s, "r", "a", "b", "c")
	take := func(job string, limits map[string]int, want bool) {
		t.Helper()
		ok, err := s.AcquireContextSlots(ctx, "acme", job, limits, at(1))
		if err != nil || ok != want {
			t.Fatalf("acquire %v for %s = %v, %v; want %v", limits, job, ok, err, want)
		}
	}
	take("a", map[string]int{"deploy": 1}, true)
	// b needs build (free) and deploy (full): it gets neither.
	take("b", map[string]int{"build": 1, "deploy": 1}, false)
	// c only needs build: had b taken build, c would be refused.
	take("c", map[string]int{"build": 1}, true)
	take("b", map[string]int{"build": 2, "deploy": 2}, true)
	take("b", map[string]int{"build": 2, "deploy": 2}, true) // idempotent
	take("a", map[string]int{"build": 2, "deploy": 1}, false)
}

// testContextConcurrencyStrategy checks that the concurrency strategy and
// timeout round-trip through upsert, get, list and policy update: an unset
// strategy is stored as queue (never ""), and a nil timeout means the
// default.
func testContextConcurrencyStrategy(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	get := func(name string) *store.Context {
		t.Helper()
		c, err := s.GetContext(ctx, "acme", name)
		must(t, err)
		return c
	}
	plain := &store.Context{OrgID: "acme", Name: "open", Type: apitypes.ContextTypeFixed, Enabled: true}
	if _, err := s.UpsertContext(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}
	same(t, "strategy written back by upsert", store.ConcurrencyQueue, plain.ConcurrencyStrategy)
	if c := get("open"); c.ConcurrencyStrategy != store.ConcurrencyQueue || c.ConcurrencyTimeoutMs != nil {
		t.Fatalf("defaults: strategy=%q timeout=%v, want queue and nil", c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs)
	}

	c := &store.Context{OrgID: "acme", Name: "deploy", Type: apitypes.ContextTypeFixed, Enabled: true, ConcurrencyLimit: pint64(1),
		ConcurrencyStrategy: store.ConcurrencyCancelPending, ConcurrencyTimeoutMs: pint64(60_000)}
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	got := get("deploy")
	same(t, "strategy after create", store.ConcurrencyCancelPending, got.ConcurrencyStrategy)
	same(t, "timeout after create", pint64(60_000), got.ConcurrencyTimeoutMs)

	// A replacing upsert with "" stores queue and a new timeout.
	c.ConcurrencyStrategy, c.ConcurrencyTimeoutMs = "", pint64(86_400_000)
	if _, err := s.UpsertContext(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	got = get("deploy")
	same(t, "strategy after upsert with \"\"", store.ConcurrencyQueue, got.ConcurrencyStrategy)
	same(t, "timeout after upsert", pint64(86_400_000), got.ConcurrencyTimeoutMs)

	// Policy updates: an unrelated field keeps both; then set; then "" and
	// nil fall back to queue and the default.
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.ConcurrencyStrategy = store.ConcurrencyCancelPending
		c.ConcurrencyTimeoutMs = pint64(1000)
		return nil
	}))
	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.AllowUntrusted = true
		return nil
	}))
	got = get("deploy")
	same(t, "strategy kept by an unrelated policy update", store.ConcurrencyCancelPending, got.ConcurrencyStrategy)
	same(t, "timeout kept by an unrelated policy update", pint64(1000), got.ConcurrencyTimeoutMs)

	list, err := s.ListContexts(ctx, "acme")
	must(t, err)
	if len(list) != 2 || list[0].Name != "deploy" || list[1].Name != "open" {
		t.Fatalf("list: %+v", list)
	}
	same(t, "listed strategies", []string{store.ConcurrencyCancelPending, store.ConcurrencyQueue},
		[]string{list[0].ConcurrencyStrategy, list[1].ConcurrencyStrategy})
	same(t, "listed timeouts", []*int64{pint64(1000), nil}, []*int64{list[0].ConcurrencyTimeoutMs, list[1].ConcurrencyTimeoutMs})

	must(t, s.UpdateContextPolicy(ctx, "acme", "deploy", func(c *store.Context) error {
		c.ConcurrencyStrategy = ""
		c.ConcurrencyTimeoutMs = nil
		return nil
	}))
	got = get("deploy")
	if got.ConcurrencyStrategy != store.ConcurrencyQueue || got.ConcurrencyTimeoutMs != nil {
		t.Fatalf("cleared: strategy=%q timeout=%v, want queue and nil", got.ConcurrencyStrategy, got.ConcurrencyTimeoutMs)
	}
	same(t, "limit untouched", pint64(1), got.ConcurrencyLimit)
}
