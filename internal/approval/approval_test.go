package approval

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
	"kici.dev/kici/internal/trustpolicy"
)

// recorder is the dispatch side of the tracker: it records queued jobs.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) EnqueueJob(_ context.Context, j *store.Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, j.ID)
	return nil
}

func (r *recorder) queued(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.ids, id)
}

type harness struct {
	t    *testing.T
	ctx  context.Context
	st   store.Store
	tr   *runs.Tracker
	enq  *recorder
	gate *Gate
	res  *Resumer
	dec  *Decider
	now  time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	h := &harness{t: t, ctx: ctx, st: st, enq: &recorder{}, now: time.Now().UTC()}
	h.gate = NewGate(st, func(ctx context.Context, org string) (store.TrustPolicy, error) {
		p, _, err := trustpolicy.Effective(ctx, st, org)
		return p, err
	}, nil)
	h.gate.now = func() time.Time { return h.now }
	// The resumer, built on the tracker, hears of finished runs.
	h.tr = runs.NewTracker(st, h.enq, nil, runs.TrackerDeps{Gate: h.gate})
	h.res = NewResumer(st, h.tr, h.gate.TrySlot, nil)
	h.tr.Subscribe(h.res)
	h.res.now = func() time.Time { return h.now }
	h.dec = NewDecider(st, nil)
	h.dec.now = func() time.Time { return h.now }
	return h
}

func (h *harness) context(c *store.Context) {
	h.t.Helper()
	c.OrgID = "acme"
	if c.Type == "" {
		c.Type = store.ContextTypeFixed
	}
	if _, err := h.st.UpsertContext(h.ctx, c, nil); err != nil {
		h.t.Fatal(err)
	}
}

// run creates a run of repo acme/app on branch main with the given jobs
// (name → contexts; "deploy" needs "build" when both exist).
func (h *harness) run(tier string, jobs map[string][]string) (*store.Run, map[string]*store.Job) {
	h.t.Helper()
	return h.runNamed("run-"+strings.ReplaceAll(h.t.Name(), "/", "-"), tier, jobs)
}

func (h *harness) runNamed(id, tier string, jobs map[string][]string) (*store.Run, map[string]*store.Job) {
	h.t.Helper()
	run := &store.Run{ID: id, WorkflowName: "ci", OrgID: "acme", RepoIdentifier: "acme/app",
		Ref: "refs/heads/main", TriggerType: apitypes.TriggerPush, TargetBranch: "main", TrustTier: tier}
	out := map[string]*store.Job{}
	var list []*store.Job
	for name, ctxs := range jobs {
		cfg, _ := json.Marshal(lockfile.Job{Name: name, Contexts: ctxs})
		j := &store.Job{ID: run.ID + "-" + name, RunID: run.ID, JobName: name, BaseJobName: name, Config: cfg}
		out[name] = j
		list = append(list, j)
	}
	if d, ok := out["deploy"]; ok && out["build"] != nil {
		d.Needs = []store.Need{{Upstream: "build"}}
	}
	if err := h.tr.CreateRun(h.ctx, run, list); err != nil {
		h.t.Fatal(err)
	}
	return run, out
}

func (h *harness) job(id string) *store.Job {
	h.t.Helper()
	j, err := h.st.GetJob(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *harness) runStatus(id string) status.Run {
	h.t.Helper()
	r, err := h.st.GetRun(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Status
}

func (h *harness) pendingHolds(runID string) []*store.HeldRun {
	h.t.Helper()
	hs, err := h.st.ListHeldRuns(h.ctx, store.HeldRunFilter{RunID: runID, Statuses: []hold.Status{hold.Pending}})
	if err != nil {
		h.t.Fatal(err)
	}
	return hs
}

func (h *harness) sweep() {
	h.t.Helper()
	if err := h.res.Sweep(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) decide(holdID string, verb DecisionWord, approver, reason string) (Result, error) {
	return h.dec.Decide(h.ctx, Decision{OrgID: "acme", HeldRunID: holdID, Decision: verb, Approver: approver, Reason: reason,
		Operator: strings.HasPrefix(approver, ServicePrefix)})
}

func TestReviewersHoldUntilEveryClauseIsApproved(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice", "bob"}})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	j := h.job(jobs["deploy"].ID)
	if j.Status != status.JobHeld || !strings.Contains(j.PendingReason, "requires approval from alice, bob") {
		t.Fatalf("job %s %q, want held with the reviewers in its reason", j.Status, j.PendingReason)
	}
	if s := h.runStatus(run.ID); s != status.RunHeld {
		t.Fatalf("run %s, want held", s)
	}
	holds := h.pendingHolds(run.ID)
	if len(holds) != 1 || holds[0].HoldType != hold.Reviewer || len(holds[0].Clauses) != 2 {
		t.Fatalf("holds %+v", holds)
	}
	id := holds[0].ID
	if _, err := h.decide(id, Approve, "carol", ""); !errors.Is(err, ErrIneligible) {
		t.Fatalf("carol approving: %v, want ErrIneligible", err)
	}
	res, err := h.decide(id, Approve, "alice", "")
	if err != nil || res.Status != hold.Pending || !slices.Equal(res.Remaining, []string{"user:bob"}) {
		t.Fatalf("alice approving: %+v %v", res, err)
	}
	h.sweep()
	if h.enq.queued(j.ID) {
		t.Fatal("job queued with bob's clause still open")
	}
	if res, err = h.decide(id, Approve, "bob", "ship it"); err != nil || res.Status != hold.Released {
		t.Fatalf("bob approving: %+v %v", res, err)
	}
	if _, err := h.decide(id, Approve, "bob", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second decision on a resolved hold: %v, want ErrNotFound", err)
	}
	h.sweep()
	if j = h.job(j.ID); j.Status != status.JobQueued || !h.enq.queued(j.ID) {
		t.Fatalf("after approval job is %s (queued to dispatch: %v)", j.Status, h.enq.queued(j.ID))
	}
	if s := h.runStatus(run.ID); s != status.RunPending {
		t.Fatalf("run %s after release, want pending", s)
	}
	log, err := h.st.ListAccessLog(h.ctx, store.AccessLogFilter{Action: "held_run.approve"})
	if err != nil || len(log) != 2 {
		t.Fatalf("access log %d rows (%v), want 2 approvals", len(log), err)
	}
}

func TestOperatorApprovalSatisfiesEveryClause(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice", "bob"}})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	res, err := h.decide(h.pendingHolds(run.ID)[0].ID, Approve, ServicePrefix+"tok1", "")
	if err != nil || res.Status != hold.Released {
		t.Fatalf("%+v %v", res, err)
	}
	h.sweep()
	if !h.enq.queued(jobs["deploy"].ID) {
		t.Fatal("not queued after the operator's approval")
	}
}

func TestRejectionCancelsTheJobAndSkipsDownstream(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice"}})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"build": {"release"}, "deploy": nil})
	res, err := h.decide(h.pendingHolds(run.ID)[0].ID, Reject, "alice", "not today")
	if err != nil || res.Status != hold.Rejected {
		t.Fatalf("%+v %v", res, err)
	}
	h.sweep()
	b := h.job(jobs["build"].ID)
	if b.Status != status.JobCancelled || b.ErrorMessage != "rejected by alice: not today" {
		t.Fatalf("build %s %q", b.Status, b.ErrorMessage)
	}
	if d := h.job(jobs["deploy"].ID); d.Status != status.JobSkipped {
		t.Fatalf("deploy %s, want skipped", d.Status)
	}
	if s := h.runStatus(run.ID); s != status.RunCancelled {
		t.Fatalf("run %s, want cancelled", s)
	}
}

func TestHardGateRejectsWithTheReason(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "prod", Enabled: true, BranchRestrictions: []string{"release/*"}})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"prod"}})
	j := h.job(jobs["deploy"].ID)
	if j.Status != status.JobFailed || !strings.HasPrefix(j.ErrorMessage, "multi-context gate: 'prod' rejected (branch_restricted: ") {
		t.Fatalf("job %s %q", j.Status, j.ErrorMessage)
	}
	if s := h.runStatus(run.ID); s != status.RunFailed {
		t.Fatalf("run %s", s)
	}
}

func TestWaitTimerReleasesWhenDue(t *testing.T) {
	h := newHarness(t)
	wait := int64(60)
	h.context(&store.Context{Name: "staging", Enabled: true, WaitTimerSeconds: &wait})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"staging"}})
	holds := h.pendingHolds(run.ID)
	if len(holds) != 1 || holds[0].HoldType != hold.Timer {
		t.Fatalf("holds %+v", holds)
	}
	h.now = h.now.Add(59 * time.Second)
	h.sweep()
	if h.enq.queued(jobs["deploy"].ID) {
		t.Fatal("released before the timer ran out")
	}
	h.now = h.now.Add(2 * time.Second)
	h.sweep()
	if !h.enq.queued(jobs["deploy"].ID) {
		t.Fatalf("not released after the timer: %s", h.job(jobs["deploy"].ID).Status)
	}
}

func TestReviewersThenTimerInOrder(t *testing.T) {
	h := newHarness(t)
	wait := int64(30)
	h.context(&store.Context{Name: "prod", Enabled: true, RequiredReviewers: []string{"alice"}, WaitTimerSeconds: &wait})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"prod"}})
	if _, err := h.decide(h.pendingHolds(run.ID)[0].ID, Approve, "alice", ""); err != nil {
		t.Fatal(err)
	}
	h.sweep()
	holds := h.pendingHolds(run.ID)
	if len(holds) != 1 || holds[0].HoldType != hold.Timer || h.job(jobs["deploy"].ID).Status != status.JobHeld {
		t.Fatalf("after approval: holds %+v", holds)
	}
	h.now = h.now.Add(31 * time.Second)
	h.sweep()
	if !h.enq.queued(jobs["deploy"].ID) {
		t.Fatal("not queued after approval and timer")
	}
}

func TestUndecidedHoldExpiresAndCancels(t *testing.T) {
	h := newHarness(t)
	exp := int64(600)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice"}, HoldExpirySeconds: &exp})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	id := h.pendingHolds(run.ID)[0].ID
	h.now = h.now.Add(601 * time.Second)
	if _, err := h.decide(id, Approve, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approving an expired hold: %v", err)
	}
	h.sweep()
	j := h.job(jobs["deploy"].ID)
	if j.Status != status.JobCancelled || !strings.HasPrefix(j.ErrorMessage, "approval expired") {
		t.Fatalf("job %s %q", j.Status, j.ErrorMessage)
	}
	hr, _ := h.st.GetHeldRun(h.ctx, id)
	if hr.Status != hold.Expired {
		t.Fatalf("hold %s", hr.Status)
	}
}

func TestForkRunHeldAsAWholeUnderDefaultPolicy(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, MinimumTrust: ptr("trusted")})
	run, jobs := h.run(store.TrustUnknown, map[string][]string{"lint": nil, "test": {"release"}})
	holds := h.pendingHolds(run.ID)
	if len(holds) != 1 || holds[0].HoldScope != hold.ScopeWorkflow || holds[0].Reason != hold.ReasonForkPR {
		t.Fatalf("holds %+v, want one workflow-scoped fork_pr hold", holds)
	}
	for _, name := range []string{"lint", "test"} {
		if j := h.job(jobs[name].ID); j.Status != status.JobHeld || !strings.Contains(j.PendingReason, "fork pull request") {
			t.Fatalf("%s %s %q", name, j.Status, j.PendingReason)
		}
	}
	// A member with CI trust read may not approve a security hold.
	if err := h.st.PutDirectoryMemberAudited(h.ctx, &store.DirectoryMember{OrgID: "acme", UserID: "u-read", Provider: "github", ProviderUserID: "7", ProviderUsername: "reader", CITrust: store.CITrustRead}, &store.AccessLogEntry{Action: "trust_directory.updated"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.decide(holds[0].ID, Approve, "u-read", ""); !errors.Is(err, ErrIneligible) {
		t.Fatalf("read-trust approval: %v", err)
	}
	if _, err := h.decide(holds[0].ID, Approve, ServicePrefix+"tok", ""); err != nil {
		t.Fatal(err)
	}
	h.sweep()
	if !h.enq.queued(jobs["lint"].ID) {
		t.Fatal("lint not queued after the fork approval")
	}
	// test names a context with a trust floor: a second, job-scoped hold.
	holds = h.pendingHolds(run.ID)
	if len(holds) != 1 || holds[0].JobID != jobs["test"].ID || holds[0].Reason != hold.ReasonContextTrust {
		t.Fatalf("holds after fork approval %+v", holds)
	}
}

func TestForkPolicyAllowRunsWithoutHold(t *testing.T) {
	h := newHarness(t)
	if _, err := h.st.UpdateTrustPolicyAudited(h.ctx, "acme", trustpolicy.Default("acme"), func(p *store.TrustPolicy) error {
		p.ForkPolicy = store.ForkAllow
		return nil
	}, &store.AccessLogEntry{Action: "trust_policy.updated"}); err != nil {
		t.Fatal(err)
	}
	_, jobs := h.run(store.TrustUnknown, map[string][]string{"lint": nil})
	if !h.enq.queued(jobs["lint"].ID) {
		t.Fatal("fork run under allow was not queued")
	}
}

func TestPendingHoldBlocksContextDeletionUntilDecided(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice"}})
	run, _ := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	err := h.st.DeleteContext(h.ctx, "acme", "release")
	if !store.IsPendingHeldRuns(err) {
		t.Fatalf("delete while held: %v, want PendingHeldRunsError", err)
	}
	if _, err := h.decide(h.pendingHolds(run.ID)[0].ID, Approve, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.st.DeleteContext(h.ctx, "acme", "release"); err != nil {
		t.Fatalf("delete after approval: %v", err)
	}
}

func TestCancelledRunCancelsItsPendingHolds(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice"}})
	run, jobs := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	if _, err := h.tr.CancelJobs(h.ctx, run.ID, "cancelled by test"); err != nil {
		t.Fatal(err)
	}
	if j := h.job(jobs["deploy"].ID); j.Status != status.JobCancelled {
		t.Fatalf("held job after run cancel: %s", j.Status)
	}
	if hs := h.pendingHolds(run.ID); len(hs) != 0 {
		t.Fatalf("pending holds after the run ended: %+v", hs)
	}
	if err := h.st.DeleteContext(h.ctx, "acme", "release"); err != nil {
		t.Fatalf("delete after the run ended: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// Concurrent partial approvals by different reviewers all count: the
// hold is released once every reviewer approved, whatever the interleaving.
func TestConcurrentPartialApprovalsAllCount(t *testing.T) {
	h := newHarness(t)
	reviewers := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: reviewers})
	run, _ := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	id := h.pendingHolds(run.ID)[0].ID
	var wg sync.WaitGroup
	for _, r := range reviewers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.decide(id, Approve, r, ""); err != nil {
				t.Error(r, err)
			}
		}()
	}
	wg.Wait()
	hr, err := h.st.GetHeldRun(h.ctx, id)
	if err != nil || hr.Status != hold.Approved || len(hr.Approvals) != len(reviewers) {
		t.Fatalf("hold %+v (%v): want approved with %d approvals", hr, err, len(reviewers))
	}
}

// A context's concurrency limit admits that many jobs of its group at once;
// the next waits held (and cannot be approved through) until a slot frees
// up, then runs.
func TestConcurrencyLimitQueuesUntilASlotFrees(t *testing.T) {
	h := newHarness(t)
	limit := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &limit})
	_, first := h.runNamed("run-a", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	second, next := h.runNamed("run-b", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	if !h.enq.queued(first["ship"].ID) {
		t.Fatal("the first job did not get the slot")
	}
	j := h.job(next["ship"].ID)
	if want := "held: waiting for a free slot of context group 'deploy' (at most 1 running), held by run run-a"; j.Status != status.JobHeld || j.PendingReason != want {
		t.Fatalf("second job %s %q, want held %q", j.Status, j.PendingReason, want)
	}
	// A third run queues behind the second, which waits first.
	_, third := h.runNamed("run-c", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	if r := h.job(third["ship"].ID).PendingReason; !strings.HasSuffix(r, "held by run run-a, queued behind run run-b") {
		t.Fatalf("third job %q", r)
	}
	holds := h.pendingHolds(second.ID)
	if len(holds) != 1 || holds[0].HoldType != hold.Concurrency {
		t.Fatalf("holds %+v", holds)
	}
	if _, err := h.decide(holds[0].ID, Approve, ServicePrefix+"op", ""); !errors.Is(err, ErrIneligible) {
		t.Fatalf("approving a concurrency hold: %v", err)
	}
	h.sweep()
	if h.enq.queued(j.ID) {
		t.Fatal("released while the slot is taken")
	}
	if err := h.tr.JobFinished(h.ctx, first["ship"].ID, status.JobSuccess, "", h.now); err != nil {
		t.Fatal(err)
	}
	h.sweep()
	if !h.enq.queued(j.ID) {
		t.Fatalf("second job %s after the slot freed", h.job(j.ID).Status)
	}
	// The slot changed hands: the third job's reason says so.
	if r := h.job(third["ship"].ID).PendingReason; !strings.HasSuffix(r, "(at most 1 running), held by run run-b") {
		t.Fatalf("third job after the second took the slot: %q", r)
	}
}

// A directory member decides only where it qualifies: it cannot reject a
// hold it is not a reviewer of, cannot end a wait timer, and a linked
// provider username does not stand in for another user's clause.
func TestMembersDecideOnlyWhereTheyQualify(t *testing.T) {
	h := newHarness(t)
	wait := int64(600)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice", "bob"}})
	h.context(&store.Context{Name: "slow", Enabled: true, WaitTimerSeconds: &wait})
	if err := h.st.PutDirectoryMemberAudited(h.ctx, &store.DirectoryMember{OrgID: "acme", UserID: "dave", Provider: "github",
		ProviderUserID: "9", ProviderUsername: "bob", CITrust: store.CITrustAdmin}, &store.AccessLogEntry{Action: "trust_directory.updated"}); err != nil {
		t.Fatal(err)
	}
	run, _ := h.runNamed("run-rev", store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	id := h.pendingHolds(run.ID)[0].ID
	for _, verb := range []DecisionWord{Reject, Approve} {
		if _, err := h.decide(id, verb, "dave", ""); !errors.Is(err, ErrIneligible) {
			t.Fatalf("dave (linked as github user bob) %s: %v, want ErrIneligible", verb, err)
		}
	}
	if _, err := h.decide(id, Approve, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.decide(id, Approve, "alice", ""); !errors.Is(err, ErrIneligible) || !strings.Contains(err.Error(), "user:bob") {
		t.Fatalf("alice approving twice: %v, want ErrIneligible naming the open clause", err)
	}
	timed, jobs := h.runNamed("run-timer", store.TrustTrusted, map[string][]string{"deploy": {"slow"}})
	tid := h.pendingHolds(timed.ID)[0].ID
	if _, err := h.decide(tid, Approve, "alice", ""); !errors.Is(err, ErrIneligible) {
		t.Fatalf("a member ending a wait timer: %v", err)
	}
	if res, err := h.decide(tid, Approve, ServicePrefix+"op", "ship now"); err != nil || res.Status != hold.Released {
		t.Fatalf("operator ending a wait timer: %+v %v", res, err)
	}
	h.sweep()
	if !h.enq.queued(jobs["deploy"].ID) {
		t.Fatal("not queued after the operator ended the timer")
	}
}

// With several jobs waiting, a freed slot goes to exactly one of them.
func TestFreedSlotGoesToOneWaiter(t *testing.T) {
	h := newHarness(t)
	limit := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &limit})
	var ids []string
	for _, r := range []string{"run-1", "run-2", "run-3", "run-4"} {
		_, jobs := h.runNamed(r, store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
		ids = append(ids, jobs["ship"].ID)
	}
	queued := func() []string {
		var out []string
		for _, id := range ids {
			if s := h.job(id).Status; s == status.JobQueued || s == status.JobRunning || s == status.JobSuccess {
				out = append(out, id)
			}
		}
		return out
	}
	if q := queued(); len(q) != 1 || q[0] != ids[0] {
		t.Fatalf("queued at start %v, want only the first", q)
	}
	for round := 1; round < len(ids); round++ {
		h.sweep()
		if q := queued(); len(q) != round {
			t.Fatalf("round %d before a slot frees: %d jobs past the gate", round, len(q))
		}
		if err := h.tr.JobFinished(h.ctx, ids[round-1], status.JobSuccess, "", h.now); err != nil {
			t.Fatal(err)
		}
		h.sweep()
		h.sweep()
		live := 0
		for _, id := range ids {
			if s := h.job(id).Status; s == status.JobQueued || s == status.JobRunning {
				live++
			}
		}
		if live != 1 {
			t.Fatalf("round %d: %d jobs queued or running at once, want 1", round, live)
		}
	}
}

func TestDecisionReasonMustBePrintable(t *testing.T) {
	h := newHarness(t)
	h.context(&store.Context{Name: "release", Enabled: true, RequiredReviewers: []string{"alice"}})
	run, _ := h.run(store.TrustTrusted, map[string][]string{"deploy": {"release"}})
	id := h.pendingHolds(run.ID)[0].ID
	for _, reason := range []string{"two\nlines", "\x1b[31mred\x1b[0m", "over\rwrite", strings.Repeat("x", MaxReasonBytes+1)} {
		if _, err := h.decide(id, Reject, "alice", reason); !errors.Is(err, ErrBadDecision) {
			t.Fatalf("reason %q: %v, want ErrBadDecision", reason, err)
		}
	}
	if len(h.pendingHolds(run.ID)) != 1 {
		t.Fatal("a refused decision changed the hold")
	}
}

// Under cancel-pending the newest job waiting for a slot replaces the ones
// already waiting: they are cancelled, saying by which run.
func TestCancelPendingKeepsOnlyTheNewestWaiting(t *testing.T) {
	h := newHarness(t)
	limit := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &limit, ConcurrencyStrategy: store.ConcurrencyCancelPending})
	_, first := h.runNamed("run-1", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	_, second := h.runNamed("run-2", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	_, third := h.runNamed("run-3", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	h.sweep()
	j2 := h.job(second["ship"].ID)
	if j2.Status != status.JobCancelled || !strings.Contains(j2.ErrorMessage, "superseded by a newer job of run run-3") {
		t.Fatalf("second job %s %q, want cancelled as superseded", j2.Status, j2.ErrorMessage)
	}
	if j3 := h.job(third["ship"].ID); j3.Status != status.JobHeld {
		t.Fatalf("third job %s, want held", j3.Status)
	}
	if err := h.tr.JobFinished(h.ctx, first["ship"].ID, status.JobSuccess, "", h.now); err != nil {
		t.Fatal(err)
	}
	h.sweep()
	if !h.enq.queued(third["ship"].ID) {
		t.Fatalf("third job %s after the slot freed", h.job(third["ship"].ID).Status)
	}
	if s := h.runStatus("run-2"); s != status.RunCancelled {
		t.Fatalf("superseded run %s", s)
	}
}

// A job counts in the group of every limited context it names, whatever
// comes first in its list: naming an unlimited context first does not
// escape a limited one.
func TestConcurrencyLimitHoldsWhateverTheContextOrder(t *testing.T) {
	h := newHarness(t)
	one := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &one})
	h.context(&store.Context{Name: "build", Enabled: true})
	_, a := h.runNamed("run-a", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	_, b := h.runNamed("run-b", store.TrustTrusted, map[string][]string{"ship": {"build", "deploy"}})
	_, c := h.runNamed("run-c", store.TrustTrusted, map[string][]string{"ship": {"nosuch", "deploy"}})
	if !h.enq.queued(a["ship"].ID) {
		t.Fatal("first job not queued")
	}
	for name, jobs := range map[string]map[string]*store.Job{"[build, deploy]": b, "[nosuch, deploy]": c} {
		if j := h.job(jobs["ship"].ID); j.Status != status.JobHeld || !strings.Contains(j.PendingReason, "context group 'deploy'") {
			t.Fatalf("job naming %s: %s %q, want held for deploy's slot", name, j.Status, j.PendingReason)
		}
	}
}

// Under cancel-pending, jobs of the same run (matrix legs) queue rather
// than supersede each other.
func TestCancelPendingSparesJobsOfTheSameRun(t *testing.T) {
	h := newHarness(t)
	one := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &one, ConcurrencyStrategy: store.ConcurrencyCancelPending})
	_, jobs := h.runNamed("run-m", store.TrustTrusted, map[string][]string{"leg1": {"deploy"}, "leg2": {"deploy"}, "leg3": {"deploy"}})
	h.sweep()
	held, queued := 0, 0
	for _, j := range jobs {
		switch h.job(j.ID).Status {
		case status.JobHeld:
			held++
		case status.JobQueued:
			queued++
		default:
			t.Fatalf("leg %s is %s", j.JobName, h.job(j.ID).Status)
		}
	}
	if held != 2 || queued != 1 {
		t.Fatalf("%d held, %d queued; want 2 and 1", held, queued)
	}
}

// A slot that frees up goes to the job already waiting, not to a job that
// arrives before the resumer's next pass.
func TestNewcomerQueuesBehindWaitingJobs(t *testing.T) {
	h := newHarness(t)
	one := int64(1)
	h.context(&store.Context{Name: "deploy", Enabled: true, ConcurrencyLimit: &one})
	_, first := h.runNamed("run-1", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	_, second := h.runNamed("run-2", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	if err := h.tr.JobFinished(h.ctx, first["ship"].ID, status.JobSuccess, "", h.now); err != nil {
		t.Fatal(err)
	}
	_, third := h.runNamed("run-3", store.TrustTrusted, map[string][]string{"ship": {"deploy"}})
	if j := h.job(third["ship"].ID); j.Status != status.JobHeld {
		t.Fatalf("newcomer %s, want held behind the waiting job", j.Status)
	}
	h.sweep()
	if !h.enq.queued(second["ship"].ID) || h.enq.queued(third["ship"].ID) {
		t.Fatalf("after the sweep: second %s, third %s", h.job(second["ship"].ID).Status, h.job(third["ship"].ID).Status)
	}
}
