package runctl

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

func TestRenderGroup(t *testing.T) {
	run := &store.Run{Ref: "refs/heads/main", SHA: "abc", RepoIdentifier: "acme/app", WorkflowName: "deploy"}
	got, err := RenderGroup("deploy-${branch}-${repo}-${event}", RunFields(run, "push"))
	if err != nil || got != "deploy-main-acme/app-push" {
		t.Errorf("render = %q, %v", got, err)
	}
	if _, err := RenderGroup("x-${nope}", RunFields(run, "push")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown field: %v", err)
	}
}

// groupRun creates run id (one job "deploy") in the concurrency group.
func (f *fixture) groupRun(t *testing.T, id string, cfg *lockfile.Concurrency) {
	t.Helper()
	ctx := context.Background()
	f.now = f.now.Add(time.Second)
	run := &store.Run{ID: id, WorkflowName: "deploy", Provider: "local", RepoIdentifier: "acme/app", Ref: "refs/heads/main", OrgID: "o", CreatedAt: f.now}
	if err := f.c.EnterGroup(ctx, run, cfg, "push"); err != nil {
		t.Fatal(err)
	}
	job := &store.Job{ID: id + "-deploy", RunID: id, JobName: "deploy", BaseJobName: "deploy", Config: json.RawMessage(`{}`), CreatedAt: f.now}
	if err := f.tr.CreateRun(ctx, run, []*store.Job{job}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) eventuallyJob(t *testing.T, id string, status status.Job) {
	t.Helper()
	if !wait.Until(5*time.Second, func() bool { return f.job(t, id).Status == status }) {
		t.Fatalf("job %s is %s, want %s", id, f.job(t, id).Status, status)
	}
}

func groupFixture(t *testing.T) *fixture {
	f := newFixtureWith(t, Config{}, true)
	t.Cleanup(f.c.Wait)
	return f
}

// TestConcurrencyGroupQueuesRunsOneAfterTheOther proves the queue half of
// concurrency groups: with cancelInProgress false and max 1, a second run of the
// group waits (pending) until the first ends, on any terminal path.
func TestConcurrencyGroupQueuesRunsOneAfterTheOther(t *testing.T) {
	f := groupFixture(t)
	ctx := context.Background()
	no := false
	cfg := &lockfile.Concurrency{HasGroup: true, Group: "deploy-${branch}", CancelInProgress: &no}
	f.groupRun(t, "r1", cfg)
	f.groupRun(t, "r2", cfg)
	f.groupRun(t, "r3", cfg)
	if j := f.job(t, "r1-deploy"); j.Status != status.JobQueued {
		t.Fatalf("first run's job = %s, want queued", j.Status)
	}
	for _, id := range []string{"r2", "r3"} {
		if j := f.job(t, id+"-deploy"); j.Status != status.JobPending {
			t.Errorf("waiting run %s job = %s, want pending", id, j.Status)
		}
	}
	// Each waiting run says which group it waits for and who holds it.
	if r := f.job(t, "r2-deploy").PendingReason; r != "waiting for concurrency group 'deploy-main' (max 1), held by run r1" {
		t.Errorf("second run's routing reason %q", r)
	}
	if r := f.job(t, "r3-deploy").PendingReason; r != "waiting for concurrency group 'deploy-main' (max 1), held by run r1" &&
		r != "waiting for concurrency group 'deploy-main' (max 1), queued behind run r2" {
		t.Errorf("third run's routing reason %q", r)
	}
	f.start(t, "r1-deploy", true)
	if err := f.tr.JobFinished(ctx, "r1-deploy", status.JobFailed, "boom", f.now); err != nil {
		t.Fatal(err)
	}
	f.eventuallyJob(t, "r2-deploy", status.JobQueued)
	if j := f.job(t, "r3-deploy"); j.Status != status.JobPending {
		t.Errorf("third run released while the second holds the slot: %s", j.Status)
	}
	if r := f.job(t, "r2-deploy").PendingReason; strings.Contains(r, "concurrency group") {
		t.Errorf("admitted run still says %q", r)
	}
	const heldByR2 = "waiting for concurrency group 'deploy-main' (max 1), held by run r2"
	if !wait.Until(5*time.Second, func() bool { return f.job(t, "r3-deploy").PendingReason == heldByR2 }) {
		t.Fatalf("third run's routing reason %q, want it held by r2", f.job(t, "r3-deploy").PendingReason)
	}
	// A cancel also releases the slot.
	if _, err := f.c.CancelRun(ctx, "r2", false, "alice"); err != nil {
		t.Fatal(err)
	}
	f.eventuallyJob(t, "r3-deploy", status.JobQueued)
	e, _ := f.st.GetConcurrencyEntry(ctx, "r1")
	if e.Group != "deploy-main" || e.Status != store.ConcurrencyCompleted || e.Max != 1 {
		t.Errorf("first entry = %+v", e)
	}
}

// TestConcurrencyGroupCancelsInProgressRun proves the cancel half of peer
// row 21 (KiCI default cancelInProgress): the newest run cancels the
// running one and proceeds.
func TestConcurrencyGroupCancelsInProgressRun(t *testing.T) {
	f := groupFixture(t)
	cfg := &lockfile.Concurrency{HasGroup: true, Group: "deploy-${ref}"}
	f.groupRun(t, "r1", cfg)
	f.start(t, "r1-deploy", true)
	f.groupRun(t, "r2", cfg)
	if j := f.job(t, "r2-deploy"); j.Status != status.JobQueued {
		t.Fatalf("newest run's job = %s, want queued at once", j.Status)
	}
	f.eventuallyJob(t, "r1-deploy", status.JobCancelling)
	f.dsp.mu.Lock()
	cancels := append([]string(nil), f.dsp.cancels...)
	f.dsp.mu.Unlock()
	if len(cancels) != 1 || !strings.Contains(cancels[0], "superseded by run r2 in concurrency group 'deploy-refs/heads/main'") {
		t.Errorf("cancels = %v", cancels)
	}
	// Another group is unaffected.
	other := &lockfile.Concurrency{HasGroup: true, Group: "other"}
	f.groupRun(t, "r3", other)
	if j := f.job(t, "r3-deploy"); j.Status != status.JobQueued {
		t.Errorf("run of another group = %s", j.Status)
	}
}

// countingEntries counts the store's concurrency-entry reads and status
// writes.
type countingEntries struct {
	store.Store
	gets, sets atomic.Int32
}

// GetConcurrencyEntry counts, then reads.
func (c *countingEntries) GetConcurrencyEntry(ctx context.Context, runID string) (*store.ConcurrencyEntry, error) {
	c.gets.Add(1)
	return c.Store.GetConcurrencyEntry(ctx, runID)
}

// SetConcurrencyStatus counts, then writes.
func (c *countingEntries) SetConcurrencyStatus(ctx context.Context, runID string, from []string, to string) (bool, error) {
	c.sets.Add(1)
	return c.Store.SetConcurrencyStatus(ctx, runID, from, to)
}

// TestUngroupedRunReadsNoEntry proves that a run EnterGroup was told has no
// group is admitted, and its end handled, without looking for its entry,
// while a run it was not told about (created by another node) still is
// looked up and admitted.
func TestUngroupedRunReadsNoEntry(t *testing.T) {
	f := groupFixture(t)
	cs := &countingEntries{Store: f.st}
	f.c.st = cs
	ctx := context.Background()
	f.groupRun(t, "r1", nil)
	f.groupRun(t, "r2", &lockfile.Concurrency{})
	for _, id := range []string{"r1", "r2"} {
		if j := f.job(t, id+"-deploy"); j.Status != status.JobQueued {
			t.Fatalf("ungrouped run %s job = %s, want queued", id, j.Status)
		}
	}
	if !f.c.Admit(ctx, "r1") {
		t.Fatal("ungrouped run not admitted")
	}
	f.start(t, "r1-deploy", true)
	if err := f.tr.JobFinished(ctx, "r1-deploy", status.JobSuccess, "", f.now); err != nil {
		t.Fatal(err)
	}
	if n, m := cs.gets.Load(), cs.sets.Load(); n != 0 || m != 0 {
		t.Fatalf("ungrouped runs: %d entry reads, %d status writes; want none", n, m)
	}
	if f.c.isUngrouped("r1") {
		t.Error("a finished run is still remembered")
	}
	// A run this controller was not told about is looked up.
	if !f.c.Admit(ctx, "elsewhere") || cs.gets.Load() != 1 {
		t.Fatalf("unknown run: %d entry reads, want 1", cs.gets.Load())
	}
}
