package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// testRunTrustFields checks that the trigger and trust facts of a run
// round-trip through CreateRun, GetRun and ListRuns, and default to "".
func testRunTrustFields(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	full := fullRun("r-full", at(1))
	plain := fullRun("r-plain", at(0))
	plain.TriggerType, plain.TargetBranch, plain.TrustTier, plain.LockFileSource, plain.WorkflowOrigin = "", "", "", "", ""
	must(t, s.CreateRun(ctx, full, nil))
	must(t, s.CreateRun(ctx, plain, nil))
	got, err := s.GetRun(ctx, "r-full")
	must(t, err)
	same(t, "GetRun", full, got)
	got, err = s.GetRun(ctx, "r-plain")
	must(t, err)
	same(t, "GetRun without trust facts", plain, got)
	list, _, err := s.ListRuns(ctx, store.RunFilter{})
	must(t, err)
	same(t, "ListRuns", []*store.Run{full, plain}, list)
}

// heldJobsRun creates run "r" with jobs "j-queued" (queued), "j-running"
// (running) and "j-done" (success).
func heldJobsRun(t *testing.T, s store.Store) {
	t.Helper()
	must(t, s.CreateRun(ctxT(t), fullRun("r", at(0)), []*store.Job{
		{ID: "j-queued", JobName: "deploy", BaseJobName: "deploy", Status: status.JobQueued, PendingReason: "no agent online"},
		{ID: "j-running", JobName: "test", BaseJobName: "test", Status: status.JobRunning},
		{ID: "j-done", JobName: "lint", BaseJobName: "lint", Status: status.JobSuccess},
	}))
}

func testHeldRuns(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	heldJobsRun(t, s)
	must(t, s.CreateRun(ctx, fullRun("r-other", at(0)), []*store.Job{{ID: "j-other", JobName: "x", BaseJobName: "x", Status: status.JobQueued}}))

	// Job-scoped: the job moves to held in the same transaction.
	h := &store.HeldRun{OrgID: "acme", RunID: "r", JobID: "j-queued", HoldType: hold.Reviewer,
		QueueType: hold.QueueContext, HoldScope: hold.ScopeJob,
		Reason:    "context 'release' requires approval from alice, bob",
		Contexts:  []string{"release", "prod", "release"},
		Clauses:   []store.ApprovalClause{{Kind: "user", Value: "alice"}, {Kind: "user", Value: "bob"}},
		ExpiresAt: at(3600)}
	ok, err := s.CreateHeldRun(ctx, h, []status.Job{status.JobPending, status.JobQueued})
	wantChanged(t, "create job hold", ok, err, true)
	if h.ID == "" || h.Status != hold.Pending || h.CreatedAt.IsZero() {
		t.Fatalf("defaults not written back: id=%q status=%q created=%v", h.ID, h.Status, h.CreatedAt)
	}
	same(t, "contexts sorted and de-duplicated", []string{"prod", "release"}, h.Contexts)
	j, err := s.GetJob(ctx, "j-queued")
	must(t, err)
	if j.Status != status.JobHeld || j.PendingReason != "held: "+string(h.Reason) {
		t.Fatalf("held job: status=%q reason=%q", j.Status, j.PendingReason)
	}
	got, err := s.GetHeldRun(ctx, h.ID)
	must(t, err)
	same(t, "GetHeldRun", h, got)

	// The job is not in jobFrom, is of another run, or is terminal (nil
	// jobFrom = any non-terminal status): nothing is written.
	for _, tc := range []struct {
		name, run, job string
		from           []status.Job
	}{
		{"status not in jobFrom", "r", "j-running", []status.Job{status.JobPending, status.JobQueued}},
		{"job of another run", "r", "j-other", nil},
		{"terminal job, nil jobFrom", "r", "j-done", nil},
		{"unknown job", "r", "j-nope", nil},
	} {
		miss := &store.HeldRun{OrgID: "acme", RunID: tc.run, JobID: tc.job, HoldType: hold.Timer, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeJob, Reason: "wait", Contexts: []string{"release"}, ExpiresAt: at(60)}
		ok, err := s.CreateHeldRun(ctx, miss, tc.from)
		wantChanged(t, tc.name, ok, err, false)
		if _, err := s.GetHeldRun(ctx, miss.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: hold row written: %v", tc.name, err)
		}
	}
	for id, want := range map[string]status.Job{"j-running": status.JobRunning, "j-other": status.JobQueued, "j-done": status.JobSuccess} {
		j, err := s.GetJob(ctx, id)
		must(t, err)
		if j.Status != want {
			t.Errorf("job %s moved to %q", id, j.Status)
		}
	}
	if n, err := s.CountPendingHeldRunsForContext(ctx, "acme", "release"); err != nil || n != 1 {
		t.Fatalf("pending count after refused creates: %d %v", n, err)
	}
	// nil jobFrom takes any non-terminal job.
	hr := &store.HeldRun{OrgID: "acme", RunID: "r", JobID: "j-running", HoldType: hold.Timer, QueueType: hold.QueueContext,
		HoldScope: hold.ScopeJob, Reason: "wait timer", ExpiresAt: at(60)}
	ok, err = s.CreateHeldRun(ctx, hr, nil)
	wantChanged(t, "nil jobFrom on a running job", ok, err, true)

	// Workflow-scoped: no job is touched; a caller-chosen id is kept.
	w := &store.HeldRun{ID: "hold-wf", OrgID: "acme", RunID: "r", HoldType: hold.Security, QueueType: hold.QueueSecurity,
		HoldScope: hold.ScopeWorkflow, Reason: hold.ReasonForkPR, ExpiresAt: at(7200)}
	ok, err = s.CreateHeldRun(ctx, w, []status.Job{status.JobPending})
	wantChanged(t, "create workflow hold", ok, err, true)
	got, err = s.GetHeldRun(ctx, "hold-wf")
	must(t, err)
	same(t, "workflow hold", w, got)
	if got.Clauses == nil || got.Contexts != nil || got.Approvals != nil {
		t.Errorf("workflow hold lists: clauses=%#v contexts=%#v approvals=%#v", got.Clauses, got.Contexts, got.Approvals)
	}
	_, err = s.GetHeldRun(ctx, "nope")
	wantErr(t, "GetHeldRun unknown", err, store.ErrNotFound)
	ok, err = s.CreateHeldRun(ctx, &store.HeldRun{ID: "hold-wf", OrgID: "acme", RunID: "r", HoldScope: hold.ScopeWorkflow}, nil)
	if ok || !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate hold id: ok=%v err=%v", ok, err)
	}

	// A partial approval stays pending, appends the approval, replaces the
	// clauses.
	partial := []store.ApprovalClause{{Kind: "user", Value: "alice", SatisfiedBy: "alice"}, {Kind: "user", Value: "bob"}}
	a1 := &store.HeldRunApproval{Approver: "alice", Decision: "approve", Clauses: []string{"alice"}, At: at(100)}
	ok, err = s.DecideHeldRun(ctx, h.ID, a1, partial, "", "", "", at(100))
	wantChanged(t, "partial approval", ok, err, true)
	got, err = s.GetHeldRun(ctx, h.ID)
	must(t, err)
	if got.Status != hold.Pending || got.ResolvedAt != nil || got.ResolvedBy != "" {
		t.Fatalf("partial approval resolved the hold: %+v", got)
	}
	same(t, "clauses after partial approval", partial, got.Clauses)
	same(t, "approvals after partial approval", []store.HeldRunApproval{*a1}, got.Approvals)

	// The resolving approval; a zero approval time takes the decision's.
	full := []store.ApprovalClause{{Kind: "user", Value: "alice", SatisfiedBy: "alice"}, {Kind: "user", Value: "bob", SatisfiedBy: "bob"}}
	a2 := &store.HeldRunApproval{Approver: "bob", Decision: "approve", Clauses: []string{"bob"}, Reason: "lgtm"}
	ok, err = s.DecideHeldRun(ctx, h.ID, a2, full, hold.Approved, "bob", "lgtm", at(200))
	wantChanged(t, "resolving approval", ok, err, true)
	if !a2.At.Equal(at(200)) {
		t.Errorf("approval time not defaulted: %v", a2.At)
	}
	got, err = s.GetHeldRun(ctx, h.ID)
	must(t, err)
	want := *h
	want.Status, want.Clauses, want.ResolvedAt, want.ResolvedBy, want.ResolveNote = hold.Approved, full, ptime(at(200)), "bob", "lgtm"
	want.Approvals = []store.HeldRunApproval{*a1, *a2}
	same(t, "resolved hold", &want, got)

	// Decided once: later decisions write nothing.
	late := &store.HeldRunApproval{Approver: "carol", Decision: "reject", Reason: "too late", At: at(300)}
	ok, err = s.DecideHeldRun(ctx, h.ID, late, []store.ApprovalClause{}, hold.Rejected, "carol", "too late", at(300))
	wantChanged(t, "decide a resolved hold", ok, err, false)
	ok, err = s.DecideHeldRun(ctx, h.ID, late, nil, "", "", "", at(300))
	wantChanged(t, "partial approval of a resolved hold", ok, err, false)
	got, err = s.GetHeldRun(ctx, h.ID)
	must(t, err)
	same(t, "resolved hold unchanged", &want, got)
	ok, err = s.DecideHeldRun(ctx, "nope", late, nil, hold.Rejected, "carol", "", at(300))
	if ok || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("decide unknown hold: ok=%v err=%v", ok, err)
	}

	// A system resolution with nil clauses keeps the stored clauses and
	// records no approval; a rejection's approval carries no clauses.
	ok, err = s.DecideHeldRun(ctx, "hold-wf", nil, nil, hold.Expired, "system", "", at(7200))
	wantChanged(t, "expire", ok, err, true)
	got, err = s.GetHeldRun(ctx, "hold-wf")
	must(t, err)
	if got.Status != hold.Expired || got.ResolvedBy != "system" || got.ResolvedAt == nil || !got.ResolvedAt.Equal(at(7200)) ||
		got.Approvals != nil || got.Clauses == nil || len(got.Clauses) != 0 {
		t.Errorf("expired hold: %+v", got)
	}
	rej := &store.HeldRunApproval{Approver: "dave", Decision: "reject", Reason: "no", At: at(70)}
	ok, err = s.DecideHeldRun(ctx, hr.ID, rej, nil, hold.Rejected, "dave", "no", at(70))
	wantChanged(t, "reject", ok, err, true)
	got, err = s.GetHeldRun(ctx, hr.ID)
	must(t, err)
	same(t, "rejection approvals", []store.HeldRunApproval{*rej}, got.Approvals)
}

func testListHeldRuns(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// 12 workflow holds: i%2 org, i%3 run, i%4 status; created at i
	// seconds (two sharing a time), expiring at 100-i seconds.
	statuses := []hold.Status{hold.Pending, hold.Approved, hold.Pending, hold.Expired}
	for i := 0; i < 12; i++ {
		h := &store.HeldRun{ID: fmt.Sprintf("h%02d", i), OrgID: []string{"acme", "other"}[i%2], RunID: fmt.Sprintf("r%d", i%3),
			HoldType: hold.Reviewer, QueueType: hold.QueueContext, HoldScope: hold.ScopeWorkflow,
			Reason: "review", Contexts: []string{fmt.Sprintf("ctx%d", i%2)}, ExpiresAt: at(100 - i), CreatedAt: at(i)}
		if i == 11 {
			h.CreatedAt = at(10) // tie with h10: id decides
		}
		ok, err := s.CreateHeldRun(ctx, h, nil)
		wantChanged(t, "create "+h.ID, ok, err, true)
		if statuses[i%4] != hold.Pending {
			ok, err := s.DecideHeldRun(ctx, h.ID, &store.HeldRunApproval{Approver: "alice", Decision: "approve", At: at(50)},
				nil, statuses[i%4], "alice", "", at(50))
			wantChanged(t, "resolve "+h.ID, ok, err, true)
		}
	}
	// A job hold, to filter on.
	heldJobsRun(t, s)
	jh := &store.HeldRun{ID: "hjob", OrgID: "acme", RunID: "r", JobID: "j-queued", HoldType: hold.Timer, QueueType: hold.QueueContext,
		HoldScope: hold.ScopeJob, ExpiresAt: at(1000), CreatedAt: at(20)}
	ok, err := s.CreateHeldRun(ctx, jh, nil)
	wantChanged(t, "create job hold", ok, err, true)

	check := func(name string, f store.HeldRunFilter, want ...string) {
		t.Helper()
		got, err := s.ListHeldRuns(ctx, f)
		must(t, err)
		if want == nil {
			want = []string{}
		}
		same(t, name, want, ids(got, func(h *store.HeldRun) string { return h.ID }))
	}
	check("all, oldest first", store.HeldRunFilter{},
		"h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07", "h08", "h09", "h10", "h11", "hjob")
	check("org", store.HeldRunFilter{OrgID: "other"}, "h01", "h03", "h05", "h07", "h09", "h11")
	check("run", store.HeldRunFilter{RunID: "r1"}, "h01", "h04", "h07", "h10")
	check("job", store.HeldRunFilter{JobID: "j-queued"}, "hjob")
	check("statuses OR", store.HeldRunFilter{Statuses: []hold.Status{hold.Approved, hold.Expired}}, "h01", "h03", "h05", "h07", "h09", "h11")
	due := at(94)
	check("due by (inclusive) and pending", store.HeldRunFilter{Statuses: []hold.Status{hold.Pending}, DueBy: &due}, "h06", "h08", "h10")
	check("combined", store.HeldRunFilter{OrgID: "acme", RunID: "r0", Statuses: []hold.Status{hold.Pending}}, "h00", "h06")
	check("limit", store.HeldRunFilter{Limit: 3}, "h00", "h01", "h02")
	check("no match", store.HeldRunFilter{OrgID: "nobody"})

	// Listed holds carry their contexts and approvals.
	got, err := s.ListHeldRuns(ctx, store.HeldRunFilter{RunID: "r1", Statuses: []hold.Status{hold.Approved}})
	must(t, err)
	if len(got) != 1 || got[0].ID != "h01" {
		t.Fatalf("approved holds of r1: %v", ids(got, func(h *store.HeldRun) string { return h.ID }))
	}
	same(t, "listed contexts", []string{"ctx1"}, got[0].Contexts)
	same(t, "listed approvals", []store.HeldRunApproval{{Approver: "alice", Decision: "approve", At: at(50)}}, got[0].Approvals)
	one, err := s.GetHeldRun(ctx, "h01")
	must(t, err)
	same(t, "listed hold equals GetHeldRun", one, got[0])
}

// testDecideHeldRunConcurrent races deciders on one hold: exactly one
// resolution wins and only its approval is recorded.
func testDecideHeldRunConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for round := 0; round < 3; round++ {
		h := &store.HeldRun{OrgID: "acme", RunID: "r", HoldType: hold.Reviewer, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeWorkflow, ExpiresAt: at(3600)}
		ok, err := s.CreateHeldRun(ctx, h, nil)
		wantChanged(t, "create", ok, err, true)
		const n = 8
		var wg sync.WaitGroup
		wins := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				to, dec := hold.Approved, "approve"
				if i%2 == 1 {
					to, dec = hold.Rejected, "reject"
				}
				who := fmt.Sprintf("user-%d", i)
				wins[i], errs[i] = s.DecideHeldRun(ctx, h.ID, &store.HeldRunApproval{Approver: who, Decision: dec, At: at(i)},
					[]store.ApprovalClause{}, to, who, "", at(i))
			}(i)
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := 0; i < n; i++ {
			if errs[i] != nil {
				t.Fatalf("decider %d: %v", i, errs[i])
			}
			if wins[i] {
				if winner >= 0 {
					t.Fatalf("round %d: deciders %d and %d both won", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no decider won", round)
		}
		got, err := s.GetHeldRun(ctx, h.ID)
		must(t, err)
		who := fmt.Sprintf("user-%d", winner)
		wantStatus := hold.Approved
		if winner%2 == 1 {
			wantStatus = hold.Rejected
		}
		if got.Status != wantStatus || got.ResolvedBy != who || len(got.Approvals) != 1 || got.Approvals[0].Approver != who {
			t.Fatalf("round %d: winner %s, stored %+v", round, who, got)
		}
	}
}

// testHeldRunGroups checks that a hold's concurrency group round-trips
// through create, get and list, and that ListHeldRuns filters by hold type
// and group, alone and combined with statuses and org.
func testHeldRunGroups(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mk := func(id, org string, typ hold.Type, group string, created int) *store.HeldRun {
		t.Helper()
		h := &store.HeldRun{ID: id, OrgID: org, RunID: "r-" + id, HoldType: typ, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeWorkflow, Reason: "wait", Group: group, ExpiresAt: at(1000), CreatedAt: at(created)}
		ok, err := s.CreateHeldRun(ctx, h, nil)
		wantChanged(t, "create "+id, ok, err, true)
		return h
	}
	c1 := mk("c1", "acme", hold.Concurrency, "deploy", 1)
	mk("c2", "acme", hold.Concurrency, "deploy", 2)
	mk("c3", "acme", hold.Concurrency, "build", 3)
	mk("c4", "other", hold.Concurrency, "deploy", 4)
	mk("r5", "acme", hold.Reviewer, "", 5)
	mk("t6", "acme", hold.Timer, "", 6)
	ok, err := s.DecideHeldRun(ctx, "c2", nil, nil, hold.Cancelled, "system", "superseded", at(10))
	wantChanged(t, "cancel c2", ok, err, true)

	got, err := s.GetHeldRun(ctx, "c1")
	must(t, err)
	same(t, "GetHeldRun with group", c1, got)
	if got, err := s.GetHeldRun(ctx, "r5"); err != nil || got.Group != "" {
		t.Fatalf("hold without group: %v group=%q", err, got.Group)
	}

	check := func(name string, f store.HeldRunFilter, want ...string) {
		t.Helper()
		list, err := s.ListHeldRuns(ctx, f)
		must(t, err)
		if want == nil {
			want = []string{}
		}
		same(t, name, want, ids(list, func(h *store.HeldRun) string { return h.ID }))
		for _, h := range list {
			if h.ID == "c1" && h.Group != "deploy" {
				t.Errorf("%s: listed c1 group %q", name, h.Group)
			}
		}
	}
	check("no filter", store.HeldRunFilter{}, "c1", "c2", "c3", "c4", "r5", "t6")
	check("hold type", store.HeldRunFilter{HoldType: hold.Concurrency}, "c1", "c2", "c3", "c4")
	check("other hold type", store.HeldRunFilter{HoldType: hold.Timer}, "t6")
	check("group", store.HeldRunFilter{Group: "deploy"}, "c1", "c2", "c4")
	check("group and org", store.HeldRunFilter{OrgID: "acme", Group: "deploy"}, "c1", "c2")
	check("group, org and pending", store.HeldRunFilter{OrgID: "acme", Group: "deploy", Statuses: []hold.Status{hold.Pending}}, "c1")
	check("type, org and pending", store.HeldRunFilter{OrgID: "acme", HoldType: hold.Concurrency,
		Statuses: []hold.Status{hold.Pending}}, "c1", "c3")
	check("type and group", store.HeldRunFilter{HoldType: hold.Concurrency, Group: "build"}, "c3")
	check("group of another type", store.HeldRunFilter{HoldType: hold.Reviewer, Group: "deploy"})
	check("unknown group", store.HeldRunFilter{Group: "nope"})
}
