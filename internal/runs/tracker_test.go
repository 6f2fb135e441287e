package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// recEnqueuer inserts a dispatch queue entry like the real dispatcher does
// and counts EnqueueJob calls per job name.
type recEnqueuer struct {
	st    store.Store
	mu    sync.Mutex
	calls map[string]int
	fail  bool
}

func (e *recEnqueuer) EnqueueJob(ctx context.Context, job *store.Job) error {
	e.mu.Lock()
	e.calls[job.JobName]++
	fail := e.fail
	e.mu.Unlock()
	if fail {
		return errors.New("queue down")
	}
	return e.st.Enqueue(ctx, &store.QueueEntry{ID: job.ID, RunID: job.RunID, JobName: job.JobName,
		RunsOnLabels: job.RunsOnLabels, Status: store.QueuePending, CreatedAt: time.Now().UTC()})
}

func (e *recEnqueuer) count(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[name]
}

type fixture struct {
	t   *testing.T
	st  store.Store
	enq *recEnqueuer
	tr  *Tracker
	ctx context.Context

	mu       sync.Mutex
	finished []*store.Run
}

func newFixture(t *testing.T) *fixture {
	st := teststore.SQLite(t)
	enq := &recEnqueuer{st: st, calls: map[string]int{}}
	f := &fixture{t: t, st: st, enq: enq, ctx: context.Background()}
	f.tr = NewTracker(st, enq, nil, TrackerDeps{Subscribers: []Subscriber{runsDone(func(r *store.Run) {
		f.mu.Lock()
		f.finished = append(f.finished, r)
		f.mu.Unlock()
	})}})
	return f
}

// runsDone is a subscriber told only of finished runs.
type runsDone func(*store.Run)

func (runsDone) Admit(context.Context, string) bool         { return true }
func (runsDone) JobReady(context.Context, *store.Job) error { return nil }
func (runsDone) JobFinished(*store.Job)                     {}
func (f runsDone) RunFinished(r *store.Run)                 { f(r) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// spec is "name" or "name<-up1:status,status;up2" style built by the helpers below.
type jobSpec struct {
	name  string
	needs []store.Need
}

func need(up string, runOn ...status.Job) store.Need { return store.Need{Upstream: up, RunOn: runOn} }

func js(name string, needs ...store.Need) jobSpec { return jobSpec{name: name, needs: needs} }

// createRun creates a run and returns it with a job-name → id map.
func (f *fixture) createRun(specs ...jobSpec) (*store.Run, map[string]string) {
	f.t.Helper()
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", Provider: "local", RepoIdentifier: "acme/app",
		RepoURL: "file:///tmp/app", Ref: "refs/heads/main", SHA: "0123456789012345678901234567890123456789",
		OrgID: "acme", CreatedAt: t0}
	ids := map[string]string{}
	var jobs []*store.Job
	for _, s := range specs {
		id := uuid.NewString()
		ids[s.name] = id
		jobs = append(jobs, &store.Job{ID: id, RunID: run.ID, JobName: s.name, BaseJobName: s.name,
			Config: []byte(`{}`), RunsOnLabels: []string{"linux"}, Needs: s.needs, CreatedAt: t0})
	}
	if err := f.tr.CreateRun(f.ctx, run, jobs); err != nil {
		f.t.Fatalf("CreateRun: %v", err)
	}
	return run, ids
}

func (f *fixture) job(id string) *store.Job {
	f.t.Helper()
	j, err := f.st.GetJob(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) run(id string) *store.Run {
	f.t.Helper()
	r, err := f.st.GetRun(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) wantStatus(ids map[string]string, want map[string]status.Job) {
	f.t.Helper()
	for name, st := range want {
		if got := f.job(ids[name]).Status; got != st {
			f.t.Errorf("job %s status = %s, want %s", name, got, st)
		}
	}
}

func (f *fixture) start(id string, at time.Time) {
	f.t.Helper()
	if err := f.tr.JobStarted(f.ctx, id, "agent-1", at); err != nil {
		f.t.Fatalf("JobStarted: %v", err)
	}
}

func (f *fixture) finish(id string, status status.Job, at time.Time) {
	f.t.Helper()
	if err := f.tr.JobFinished(f.ctx, id, status, "", at); err != nil {
		f.t.Fatalf("JobFinished: %v", err)
	}
}

func TestLinearPipelineFailureSkipsDownstream(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(js("build"), js("test", need("build")), js("deploy", need("test", status.JobSuccess)))
	f.wantStatus(ids, map[string]status.Job{"build": status.JobQueued, "test": status.JobPending, "deploy": status.JobPending})
	if f.enq.count("build") != 1 || f.enq.count("test") != 0 {
		t.Fatalf("enqueue calls: %v", f.enq.calls)
	}
	if r := f.run(run.ID); r.Status != status.RunPending || r.StartedAt != nil {
		t.Fatalf("new run: %+v", r)
	}

	f.start(ids["build"], t0.Add(time.Second))
	r := f.run(run.ID)
	if r.Status != status.RunRunning || r.StartedAt == nil || !r.StartedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("run after first start: %+v", r)
	}
	b := f.job(ids["build"])
	if b.Status != status.JobRunning || b.AgentID != "agent-1" || b.StartedAt == nil || b.LastHeartbeatAt == nil {
		t.Fatalf("build after start: %+v", b)
	}

	f.finish(ids["build"], status.JobSuccess, t0.Add(3*time.Second))
	b = f.job(ids["build"])
	if b.DurationMs == nil || *b.DurationMs != 2000 || b.CompletedAt == nil {
		t.Fatalf("build duration: %+v", b)
	}
	f.wantStatus(ids, map[string]status.Job{"test": status.JobQueued, "deploy": status.JobPending})
	if f.enq.count("test") != 1 {
		t.Fatalf("test enqueued %d times", f.enq.count("test"))
	}

	f.start(ids["test"], t0.Add(4*time.Second))
	if err := f.tr.JobFinished(f.ctx, ids["test"], status.JobFailed, "exit status 1", t0.Add(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	d := f.job(ids["deploy"])
	if d.Status != status.JobSkipped || d.ErrorMessage != "upstream_unmet: test (failed)" || d.CompletedAt == nil {
		t.Fatalf("deploy: %+v", d)
	}
	if f.job(ids["test"]).ErrorMessage != "exit status 1" {
		t.Fatalf("test error message not stored")
	}
	if f.enq.count("deploy") != 0 {
		t.Fatal("deploy was enqueued")
	}
	r = f.run(run.ID)
	if r.Status != status.RunFailed || r.FailureReason != "Failed jobs: test" || r.CompletedAt == nil ||
		r.DurationMs == nil || *r.DurationMs != 5000 {
		t.Fatalf("run: %+v (duration %v)", r, r.DurationMs)
	}
	if len(f.finished) != 1 || f.finished[0].ID != run.ID || f.finished[0].Status != status.RunFailed {
		t.Fatalf("RunFinished calls: %+v", f.finished)
	}
}

var allTerminal = []status.Job{status.JobSuccess, status.JobFailed, status.JobCancelled, status.JobSkipped, status.JobTimedOutStale, status.JobDriftDropped}

// dag: build → test → {notify (always), rollback (on-failure)}; report needs
// rollback with on-skip.
func alwaysDAG() []jobSpec {
	return []jobSpec{
		js("build"),
		js("test", need("build")),
		js("notify", need("test", allTerminal...)),
		js("rollback", need("test", status.JobFailed, status.JobTimedOutStale)),
		js("report", need("rollback", status.JobSuccess, status.JobSkipped)),
	}
}

func TestCascadeStopsAtAlwaysAndOnSkipEdges(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(alwaysDAG()...)
	f.start(ids["build"], t0)
	f.finish(ids["build"], status.JobFailed, t0.Add(time.Second))

	f.wantStatus(ids, map[string]status.Job{"build": status.JobFailed, "test": status.JobSkipped, "notify": status.JobQueued,
		"rollback": status.JobSkipped, "report": status.JobQueued})
	if got := f.job(ids["test"]).ErrorMessage; got != "upstream_unmet: build (failed)" {
		t.Errorf("test reason %q", got)
	}
	if got := f.job(ids["rollback"]).ErrorMessage; got != "upstream_unmet: test (skipped)" {
		t.Errorf("rollback reason %q", got)
	}
	if f.enq.count("notify") != 1 || f.enq.count("report") != 1 || f.enq.count("rollback") != 0 {
		t.Fatalf("enqueue calls %v", f.enq.calls)
	}
	if r := f.run(run.ID); r.Status != status.RunRunning {
		t.Fatalf("run should still be running, got %s", r.Status)
	}
	f.finish(ids["notify"], status.JobSuccess, t0.Add(2*time.Second))
	f.finish(ids["report"], status.JobSuccess, t0.Add(3*time.Second))
	r := f.run(run.ID)
	if r.Status != status.RunFailed || r.FailureReason != "Failed jobs: build" {
		t.Fatalf("run %+v", r)
	}
}

func TestOnFailureEdgeReleasedWhenUpstreamFails(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(alwaysDAG()...)
	f.finish(ids["build"], status.JobSuccess, t0)
	f.finish(ids["test"], status.JobTimedOutStale, t0.Add(time.Second))
	f.wantStatus(ids, map[string]status.Job{"notify": status.JobQueued, "rollback": status.JobQueued, "report": status.JobPending})
	f.finish(ids["rollback"], status.JobSuccess, t0.Add(2*time.Second))
	f.wantStatus(ids, map[string]status.Job{"report": status.JobQueued})
	f.finish(ids["notify"], status.JobCancelled, t0.Add(2*time.Second))
	f.finish(ids["report"], status.JobSuccess, t0.Add(3*time.Second))
	r := f.run(run.ID)
	// timed_out_stale counts as failed and wins over cancelled.
	if r.Status != status.RunFailed || r.FailureReason != "Failed jobs: test" {
		t.Fatalf("run %+v", r)
	}
	if r.DurationMs == nil || *r.DurationMs != 3000 { // never started: measured from createdAt
		t.Fatalf("duration %v", r.DurationMs)
	}
}

func TestOnFailureEdgeSkippedOnSuccess(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(alwaysDAG()...)
	f.finish(ids["build"], status.JobSuccess, t0)
	f.finish(ids["test"], status.JobSuccess, t0)
	f.wantStatus(ids, map[string]status.Job{"notify": status.JobQueued, "rollback": status.JobSkipped, "report": status.JobQueued})
	if got := f.job(ids["rollback"]).ErrorMessage; got != "upstream_unmet: test (success)" {
		t.Errorf("rollback reason %q", got)
	}
	f.finish(ids["notify"], status.JobSuccess, t0)
	f.finish(ids["report"], status.JobSuccess, t0)
	if r := f.run(run.ID); r.Status != status.RunSuccess || r.FailureReason != "" {
		t.Fatalf("run %+v", r) // skipped counts as success
	}
}

func TestMatrixLegs(t *testing.T) {
	legs := []string{"test (1.22, linux)", "test (1.23, linux)"}
	deployNeeds := []store.Need{need(legs[0]), need(legs[1])}

	t.Run("waits for every leg", func(t *testing.T) {
		f := newFixture(t)
		_, ids := f.createRun(js(legs[0]), js(legs[1]), js("deploy", deployNeeds...))
		f.wantStatus(ids, map[string]status.Job{legs[0]: status.JobQueued, legs[1]: status.JobQueued, "deploy": status.JobPending})
		f.finish(ids[legs[0]], status.JobSuccess, t0)
		f.wantStatus(ids, map[string]status.Job{"deploy": status.JobPending})
		f.finish(ids[legs[1]], status.JobSuccess, t0)
		f.wantStatus(ids, map[string]status.Job{"deploy": status.JobQueued})
		if f.enq.count("deploy") != 1 {
			t.Fatal("deploy not enqueued once")
		}
	})
	t.Run("one failed leg skips at once", func(t *testing.T) {
		f := newFixture(t)
		run, ids := f.createRun(js(legs[0]), js(legs[1]), js("deploy", deployNeeds...))
		f.start(ids[legs[1]], t0)
		f.finish(ids[legs[0]], status.JobFailed, t0)
		d := f.job(ids["deploy"])
		if d.Status != status.JobSkipped || d.ErrorMessage != "upstream_unmet: test (1.22, linux) (failed)" {
			t.Fatalf("deploy %+v", d)
		}
		if r := f.run(run.ID); r.Status != status.RunRunning {
			t.Fatalf("run status %s while a leg still runs", r.Status)
		}
		f.finish(ids[legs[1]], status.JobSuccess, t0.Add(time.Second))
		if r := f.run(run.ID); r.Status != status.RunFailed || r.FailureReason != "Failed jobs: test (1.22, linux)" {
			t.Fatalf("run %+v", r)
		}
	})
}

func TestDeriveRunStatus(t *testing.T) {
	mk := func(statuses ...status.Job) []*store.Job {
		var out []*store.Job
		for i, s := range statuses {
			out = append(out, &store.Job{JobName: fmt.Sprintf("j%d", i), Status: s})
		}
		return out
	}
	cases := []struct {
		statuses []status.Job
		want     status.Run
		reason   string
	}{
		{[]status.Job{status.JobSuccess, status.JobSuccess}, status.RunSuccess, ""},
		{[]status.Job{status.JobSuccess, status.JobSkipped}, status.RunSuccess, ""},
		{[]status.Job{status.JobSkipped}, status.RunSuccess, ""},
		{[]status.Job{status.JobSuccess, status.JobCancelled, status.JobSkipped}, status.RunCancelled, ""},
		{[]status.Job{status.JobFailed, status.JobCancelled}, status.RunFailed, "Failed jobs: j0"},
		{[]status.Job{status.JobCancelled, status.JobDriftDropped, status.JobTimedOutStale, status.JobFailed}, status.RunFailed, "Failed jobs: j1, j2, j3"},
	}
	for _, c := range cases {
		got, reason := DeriveRunStatus(mk(c.statuses...))
		if got != c.want || reason != c.reason {
			t.Errorf("%v: got %s %q, want %s %q", c.statuses, got, reason, c.want, c.reason)
		}
	}
}

func TestCancelledRunAndReplays(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(js("a"), js("b"))
	f.start(ids["a"], t0)
	f.start(ids["a"], t0.Add(time.Second)) // replay: still running, heartbeat only
	a := f.job(ids["a"])
	if a.Status != status.JobRunning || !a.StartedAt.Equal(t0) || a.LastHeartbeatAt == nil || !a.LastHeartbeatAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("replayed start moved startedAt or left the heartbeat: %+v", a)
	}
	// Its agent reconnects: recovering, then started again, keeping the
	// first start.
	if _, err := f.st.UpdateJobStatus(f.ctx, ids["a"], []status.Job{status.JobRunning}, status.JobRecovering, store.JobUpdate{}); err != nil {
		t.Fatal(err)
	}
	f.start(ids["a"], t0.Add(1500*time.Millisecond))
	if a = f.job(ids["a"]); a.Status != status.JobRunning || !a.StartedAt.Equal(t0) {
		t.Fatalf("start after recovering: %+v; want running, started at %v", a, t0)
	}
	f.finish(ids["a"], status.JobSuccess, t0.Add(2*time.Second))
	f.finish(ids["b"], status.JobCancelled, t0.Add(2*time.Second))
	r := f.run(run.ID)
	if r.Status != status.RunCancelled || r.FailureReason != "" {
		t.Fatalf("run %+v", r)
	}
	// Replays: same status, a different terminal status, and a late start.
	f.finish(ids["a"], status.JobSuccess, t0.Add(5*time.Second))
	f.finish(ids["b"], status.JobFailed, t0.Add(5*time.Second))
	f.start(ids["b"], t0.Add(6*time.Second))
	a = f.job(ids["a"])
	if !a.CompletedAt.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("replay changed completedAt: %v", a.CompletedAt)
	}
	if b := f.job(ids["b"]); b.Status != status.JobCancelled {
		t.Fatalf("b = %s", b.Status)
	}
	if r2 := f.run(run.ID); r2.Status != status.RunCancelled || !r2.CompletedAt.Equal(*r.CompletedAt) {
		t.Fatalf("run changed by replay: %+v", r2)
	}
	if len(f.finished) != 1 {
		t.Fatalf("RunFinished called %d times", len(f.finished))
	}
	if f.enq.count("a") != 1 || f.enq.count("b") != 1 {
		t.Fatalf("enqueue calls %v", f.enq.calls)
	}
	if err := f.tr.JobFinished(f.ctx, ids["a"], status.JobRunning, "", t0); err == nil {
		t.Fatal("non-terminal status accepted by JobFinished")
	}
	if err := f.tr.JobFinished(f.ctx, uuid.NewString(), status.JobSuccess, "", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}

// Two upstreams finishing at the same moment release their shared downstream
// exactly once — within one tracker (per-run lock) and across two trackers on
// the same store (conditional pending→queued update only).
func TestConcurrentUpstreamsReleaseOnce(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("sameTracker=%v", shared), func(t *testing.T) {
			f := newFixture(t)
			other := f.tr
			if !shared {
				other = NewTracker(f.st, f.enq, nil, TrackerDeps{})
			}
			const rounds = 30
			for i := 0; i < rounds; i++ {
				_, ids := f.createRun(js("a"), js("b"), js("c", need("a"), need("b")))
				var wg sync.WaitGroup
				start := make(chan struct{})
				for _, x := range []struct {
					tr   *Tracker
					name string
				}{{f.tr, "a"}, {other, "b"}} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						if err := x.tr.JobFinished(f.ctx, ids[x.name], status.JobSuccess, "", t0); err != nil {
							t.Error(err)
						}
					}()
				}
				close(start)
				wg.Wait()
				if st := f.job(ids["c"]).Status; st != status.JobQueued {
					t.Fatalf("round %d: c = %s", i, st)
				}
			}
			if n := f.enq.count("c"); n != rounds {
				t.Fatalf("c enqueued %d times over %d runs", n, rounds)
			}
		})
	}
}

func TestCreateRunValidation(t *testing.T) {
	f := newFixture(t)
	run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", OrgID: "acme"}
	if err := f.tr.CreateRun(f.ctx, run, nil); !errors.Is(err, ErrNoJobs) {
		t.Fatalf("zero jobs: %v", err)
	}
	bad := []*store.Job{{ID: uuid.NewString(), RunID: run.ID, JobName: "a", Needs: []store.Need{need("ghost")}}}
	if err := f.tr.CreateRun(f.ctx, run, bad); err == nil {
		t.Fatal("unknown need accepted")
	}
	if _, err := f.st.GetRun(f.ctx, run.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("invalid run persisted: %v", err)
	}
}

func TestEnqueueFailureAndRecover(t *testing.T) {
	f := newFixture(t)
	f.enq.fail = true
	runA, idsA := f.createRun(js("a"), js("b", need("a")))
	f.enq.fail = false
	if f.job(idsA["a"]).Status != status.JobQueued {
		t.Fatal("a should be queued even though enqueue failed")
	}
	// A run whose job finished but whose downstream was never evaluated and
	// whose run was never completed (simulates a crash between writes).
	runB, idsB := f.createRun(js("x"), js("y", need("x")))
	ok, err := f.st.UpdateJobStatus(f.ctx, idsB["x"], nil, status.JobSuccess, store.JobUpdate{})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	runC, idsC := f.createRun(js("solo"))
	if _, err := f.st.UpdateJobStatus(f.ctx, idsC["solo"], nil, status.JobSuccess, store.JobUpdate{}); err != nil {
		t.Fatal(err)
	}

	var done []string
	tr2 := NewTracker(f.st, f.enq, nil, TrackerDeps{ // a fresh process
		Subscribers: []Subscriber{runsDone(func(r *store.Run) { done = append(done, r.ID) })}})
	if err := tr2.Recover(f.ctx); err != nil {
		t.Fatal(err)
	}
	if f.enq.count("a") != 2 {
		t.Fatalf("a enqueued %d times, want 2 (failed + recovered)", f.enq.count("a"))
	}
	if f.job(idsB["y"]).Status != status.JobQueued || f.enq.count("y") != 1 {
		t.Fatal("y not released by Recover")
	}
	if r := f.run(runC.ID); r.Status != status.RunSuccess || len(done) != 1 || done[0] != runC.ID {
		t.Fatalf("runC %+v, finished %v", r, done)
	}
	// A second Recover is a no-op.
	if err := tr2.Recover(f.ctx); err != nil {
		t.Fatal(err)
	}
	if f.enq.count("a") != 2 || f.enq.count("y") != 1 || len(done) != 1 {
		t.Fatalf("second Recover acted: %v %v", f.enq.calls, done)
	}
	_ = runA
	_ = runB
}

func TestStepStatus(t *testing.T) {
	f := newFixture(t)
	run, ids := f.createRun(js("a"))
	code := 0
	if err := f.tr.StepStatus(f.ctx, &store.Step{RunID: run.ID, JobID: ids["a"], StepIndex: 0, StepName: "build",
		Status: status.StepSuccess, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	steps, err := f.st.ListSteps(f.ctx, ids["a"])
	if err != nil || len(steps) != 1 || steps[0].Status != status.StepSuccess || steps[0].StepName != "build" {
		t.Fatalf("steps %+v %v", steps, err)
	}
}

// barrierStore makes the first two ListJobs calls wait for each other before
// reading, so two evaluations of the same run see the same snapshot and both
// try to release the downstream job.
type barrierStore struct {
	store.Store
	mu      sync.Mutex
	arrived int
	gate    chan struct{}
}

func (b *barrierStore) ListJobs(ctx context.Context, runID string) ([]*store.Job, error) {
	b.mu.Lock()
	gate := b.gate
	if gate != nil {
		b.arrived++
		if b.arrived == 2 {
			close(gate)
			b.gate = nil
		}
	}
	b.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-time.After(5 * time.Second):
		}
	}
	return b.Store.ListJobs(ctx, runID)
}

func TestRacingEvaluationsReleaseOnce(t *testing.T) {
	base := teststore.SQLite(t)
	bs := &barrierStore{Store: base}
	enq := &recEnqueuer{st: base, calls: map[string]int{}}
	tr1, tr2 := NewTracker(bs, enq, nil, TrackerDeps{}), NewTracker(bs, enq, nil, TrackerDeps{})
	ctx := context.Background()
	const rounds = 10
	for i := 0; i < rounds; i++ {
		run := &store.Run{ID: uuid.NewString(), WorkflowName: "ci", OrgID: "acme", CreatedAt: t0}
		a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
		jobs := []*store.Job{
			{ID: a, RunID: run.ID, JobName: "a", Config: []byte(`{}`)},
			{ID: b, RunID: run.ID, JobName: "b", Config: []byte(`{}`)},
			{ID: c, RunID: run.ID, JobName: "c", Config: []byte(`{}`), Needs: []store.Need{need("a"), need("b")}},
		}
		if err := tr1.CreateRun(ctx, run, jobs); err != nil {
			t.Fatal(err)
		}
		bs.mu.Lock()
		bs.arrived, bs.gate = 0, make(chan struct{})
		bs.mu.Unlock()
		var wg sync.WaitGroup
		for _, x := range []struct {
			tr *Tracker
			id string
		}{{tr1, a}, {tr2, b}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := x.tr.JobFinished(ctx, x.id, status.JobSuccess, "", t0); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if j, _ := base.GetJob(ctx, c); j.Status != status.JobQueued {
			t.Fatalf("round %d: c = %s", i, j.Status)
		}
	}
	if n := enq.count("c"); n != rounds {
		t.Fatalf("c enqueued %d times over %d runs", n, rounds)
	}
}
