package runctl

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// fakeDispatcher stands in for the agent side: connected says which jobs
// have a live agent; it records the cancels sent.
type fakeDispatcher struct {
	st        store.Store
	mu        sync.Mutex
	connected map[string]bool
	cancels   []string
	aborted   []string
	draining  bool
}

func (f *fakeDispatcher) CancelJob(jobID, reason string, force bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.connected[jobID] {
		return false
	}
	s := jobID + ":" + reason
	if force {
		s += ":force"
	}
	f.cancels = append(f.cancels, s)
	return true
}

func (f *fakeDispatcher) AbortJob(ctx context.Context, jobID, reason string) bool {
	f.mu.Lock()
	f.aborted = append(f.aborted, jobID)
	f.mu.Unlock()
	ok, _ := f.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed)
	return ok
}

func (f *fakeDispatcher) ExpireQueued(ctx context.Context, jobID string) (bool, error) {
	return f.st.SetQueueStatus(ctx, jobID, []string{store.QueuePending}, store.QueueExpired)
}
func (f *fakeDispatcher) SetDraining(on bool) { f.draining = on }
func (f *fakeDispatcher) Draining() bool      { return f.draining }
func (f *fakeDispatcher) JobsRunning() int    { return 0 }

// enqueuer puts released jobs in the real queue table.
type enqueuer struct{ st store.Store }

func (e enqueuer) EnqueueJob(ctx context.Context, j *store.Job) error {
	return e.st.Enqueue(ctx, &store.QueueEntry{ID: j.ID, RunID: j.RunID, JobName: j.JobName, RunsOnLabels: j.RunsOnLabels, Status: store.QueuePending, CreatedAt: j.CreatedAt})
}

type fixture struct {
	st  store.Store
	tr  *runs.Tracker
	dsp *fakeDispatcher
	c   *Controller
	now time.Time
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, false)
}

// newFixtureWith is newFixture whose tracker, with groups, admits runs
// through the controller (workflow concurrency groups).
func newFixtureWith(t *testing.T, cfg Config, groups bool) *fixture {
	t.Helper()
	st := teststore.SQLite(t)
	f := &fixture{st: st, dsp: &fakeDispatcher{st: st, connected: map[string]bool{}}, now: time.Now().UTC().Truncate(time.Millisecond)}
	f.tr = runs.NewTracker(st, enqueuer{st}, nil, runs.TrackerDeps{})
	f.c = New(cfg, st, f.dsp, f.tr, nil)
	if groups {
		// The controller, built on the tracker, admits its runs and hears
		// of finished ones.
		f.tr.Subscribe(f.c)
	}
	f.c.now = func() time.Time { return f.now }
	return f
}

// addRun creates run r with jobs build → test → deploy (a chain) and an
// independent job lint; build and lint are released (queued) at once.
func (f *fixture) addRun(t *testing.T, id string, timeoutMs int64) {
	t.Helper()
	run := &store.Run{ID: id, WorkflowName: "ci", Provider: "local", RepoIdentifier: "o/r", OrgID: "o", TimeoutMs: timeoutMs, CreatedAt: f.now}
	mk := func(name string, needs ...string) *store.Job {
		j := &store.Job{ID: id + "-" + name, RunID: id, JobName: name, BaseJobName: name, Config: json.RawMessage(`{}`), CreatedAt: f.now}
		for _, n := range needs {
			j.Needs = append(j.Needs, store.Need{Upstream: n})
		}
		return j
	}
	if err := f.tr.CreateRun(context.Background(), run, []*store.Job{mk("build"), mk("test", "build"), mk("deploy", "test"), mk("lint")}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) job(t *testing.T, id string) *store.Job {
	t.Helper()
	j, err := f.st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (f *fixture) run(t *testing.T, id string) *store.Run {
	t.Helper()
	r, err := f.st.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) start(t *testing.T, jobID string, connected bool) {
	t.Helper()
	if _, err := f.st.ClaimByID(context.Background(), jobID, "agent-1", f.now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.JobStarted(context.Background(), jobID, "agent-1", f.now); err != nil {
		t.Fatal(err)
	}
	f.dsp.mu.Lock()
	f.dsp.connected[jobID] = connected
	f.dsp.mu.Unlock()
}

func TestCancelRunAnswersNotFoundAndTerminal(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	if _, err := f.c.CancelRun(ctx, "nope", false, "alice"); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	f.addRun(t, "r1", 0)
	if st, err := f.c.CancelRun(ctx, "r1", false, "alice"); err != nil || st != "cancelled" {
		t.Fatalf("cancel of a run with nothing started = %q, %v; want cancelled at once", st, err)
	}
	if _, err := f.c.CancelRun(ctx, "r1", false, "alice"); !errors.Is(err, ErrRunTerminal) {
		t.Errorf("second cancel of a finished run: %v, want ErrRunTerminal", err)
	}
	for _, name := range []string{"build", "test", "deploy", "lint"} {
		j := f.job(t, "r1-"+name)
		if j.Status != status.JobCancelled || j.ErrorMessage != "cancelled by alice" {
			t.Errorf("job %s = %s %q", name, j.Status, j.ErrorMessage)
		}
	}
	q, _ := f.st.ListQueue(ctx, []string{store.QueuePending})
	if len(q) != 0 {
		t.Errorf("queue entries still pending after cancel: %d", len(q))
	}
}

// TestCancelRunWaitsForAgentsThenEnds proves the run shows cancelling until
// the agent confirms, that nothing downstream is released meanwhile, and
// that the run ends cancelled.
func TestCancelRunWaitsForAgentsThenEnds(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	f.addRun(t, "r1", 0)
	f.start(t, "r1-build", true)
	st, err := f.c.CancelRun(ctx, "r1", false, "alice")
	if err != nil || st != "cancelling" {
		t.Fatalf("cancel = %q, %v; want cancelling", st, err)
	}
	if got := f.dsp.cancels; len(got) != 1 || got[0] != "r1-build:cancelled by alice" {
		t.Errorf("cancels sent = %v", got)
	}
	if j := f.job(t, "r1-build"); j.Status != status.JobCancelling {
		t.Errorf("running job = %s, want cancelling", j.Status)
	}
	if r := f.run(t, "r1"); r.Status != status.RunCancelling {
		t.Errorf("run = %s, want cancelling", r.Status)
	}
	// The agent confirms: the job ended (even successfully: its cleanup
	// ran); test/deploy were cancelled before and stay so.
	if err := f.tr.JobFinished(ctx, "r1-build", status.JobCancelled, "cancelled by alice", f.now); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, "r1"); r.Status != status.RunCancelled {
		t.Errorf("run after confirmation = %s, want cancelled", r.Status)
	}
	if j := f.job(t, "r1-test"); j.Status != status.JobCancelled {
		t.Errorf("downstream job = %s, want cancelled (never released)", j.Status)
	}
	// A forced cancel is passed on with the force flag.
	f.addRun(t, "r2", 0)
	f.start(t, "r2-build", true)
	if _, err := f.c.CancelRun(ctx, "r2", true, "bob"); err != nil {
		t.Fatal(err)
	}
	if got := f.dsp.cancels[len(f.dsp.cancels)-1]; got != "r2-build:cancelled by bob:force" {
		t.Errorf("forced cancel sent as %q", got)
	}
}

// TestCancelRunWithAgentGoneEndsAtOnce proves that abort always
// succeeds, including when the assigned agent is gone.
func TestCancelRunWithAgentGoneEndsAtOnce(t *testing.T) {
	f := newFixture(t, Config{})
	f.addRun(t, "r1", 0)
	f.start(t, "r1-build", false)
	st, err := f.c.CancelRun(context.Background(), "r1", false, "alice")
	if err != nil || st != "cancelled" {
		t.Fatalf("cancel = %q, %v; want cancelled at once", st, err)
	}
	if j := f.job(t, "r1-build"); j.Status != status.JobCancelled || !strings.Contains(j.ErrorMessage, "no connected agent") {
		t.Errorf("job = %s %q", j.Status, j.ErrorMessage)
	}
}

// TestStaleJobTimesOutAndRunEnds proves that a job whose
// agent stopped heartbeating becomes timed_out_stale and the run fails.
func TestStaleJobTimesOutAndRunEnds(t *testing.T) {
	f := newFixture(t, Config{StaleThreshold: 10 * time.Second, QueueTimeout: -1})
	ctx := context.Background()
	f.addRun(t, "r1", 0)
	f.start(t, "r1-build", true)
	f.start(t, "r1-lint", true)
	f.now = f.now.Add(5 * time.Second)
	if err := f.st.TouchJobHeartbeat(ctx, "r1-lint", f.now); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(6 * time.Second) // build silent 11 s, lint 6 s
	f.c.Scan(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobTimedOutStale || !strings.HasPrefix(j.ErrorMessage, "no heartbeat for 11s") {
		t.Errorf("silent job = %s %q", j.Status, j.ErrorMessage)
	}
	if j := f.job(t, "r1-lint"); j.Status != status.JobRunning {
		t.Errorf("heartbeating job = %s, want running", j.Status)
	}
	if j := f.job(t, "r1-test"); j.Status != status.JobSkipped {
		t.Errorf("downstream of the stale job = %s, want skipped", j.Status)
	}
	// The agent's late terminal report changes nothing.
	if err := f.tr.JobFinished(ctx, "r1-build", status.JobSuccess, "", f.now); err != nil {
		t.Fatal(err)
	}
	if j := f.job(t, "r1-build"); j.Status != status.JobTimedOutStale {
		t.Errorf("late report overwrote the stale status: %s", j.Status)
	}
	if err := f.tr.JobFinished(ctx, "r1-lint", status.JobSuccess, "", f.now); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, "r1"); r.Status != status.RunFailed {
		t.Errorf("run = %s, want failed", r.Status)
	}
}

// TestServerOwnedJobDeadline proves that a job past its
// timeout (plus the grace) fails on the orchestrator's authority even
// though its agent keeps heartbeating or is gone.
func TestServerOwnedJobDeadline(t *testing.T) {
	f := newFixture(t, Config{StaleThreshold: time.Hour, DeadlineGrace: 2 * time.Second, QueueTimeout: -1})
	ctx := context.Background()
	run := &store.Run{ID: "r2", WorkflowName: "ci", OrgID: "o", CreatedAt: f.now}
	if err := f.tr.CreateRun(ctx, run, []*store.Job{{ID: "r2-j", RunID: "r2", JobName: "j", Config: json.RawMessage(`{}`), TimeoutMs: 5000, CreatedAt: f.now}}); err != nil {
		t.Fatal(err)
	}
	f.start(t, "r2-j", true)
	f.now = f.now.Add(6 * time.Second)
	f.c.Scan(ctx)
	if j := f.job(t, "r2-j"); j.Status != status.JobRunning {
		t.Errorf("within the grace: %s, want running", j.Status)
	}
	f.now = f.now.Add(2 * time.Second)
	f.c.Scan(ctx)
	j := f.job(t, "r2-j")
	if j.Status != status.JobFailed || !strings.HasPrefix(j.ErrorMessage, JobTimeoutPrefix) {
		t.Errorf("past deadline: %s %q", j.Status, j.ErrorMessage)
	}
	if len(f.dsp.aborted) == 0 || f.dsp.aborted[len(f.dsp.aborted)-1] != "r2-j" {
		t.Errorf("agent was not told to stop the job: %v", f.dsp.aborted)
	}
	if r := f.run(t, "r2"); r.Status != status.RunFailed {
		t.Errorf("run = %s", r.Status)
	}
}

// TestWorkflowTimeoutCancelsThenFails: a run past its workflow timeout is
// cancelled; jobs its agents do not stop within the grace fail.
func TestWorkflowTimeoutCancelsThenFails(t *testing.T) {
	f := newFixture(t, Config{StaleThreshold: time.Hour, DeadlineGrace: 2 * time.Second, QueueTimeout: -1})
	ctx := context.Background()
	f.addRun(t, "r1", 10_000)
	f.start(t, "r1-build", true)
	f.now = f.now.Add(11 * time.Second)
	f.c.Scan(ctx)
	if r := f.run(t, "r1"); r.Status != status.RunCancelling {
		t.Fatalf("run past its timeout = %s, want cancelling", r.Status)
	}
	if len(f.dsp.cancels) != 1 || !strings.Contains(f.dsp.cancels[0], WorkflowTimeoutPrefix) {
		t.Errorf("cancels = %v", f.dsp.cancels)
	}
	f.now = f.now.Add(3 * time.Second)
	f.c.Scan(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobFailed || !strings.HasPrefix(j.ErrorMessage, WorkflowTimeoutPrefix) {
		t.Errorf("job the agent did not stop = %s %q", j.Status, j.ErrorMessage)
	}
	if r := f.run(t, "r1"); r.Status != status.RunFailed {
		t.Errorf("run = %s, want failed", r.Status)
	}
}

// TestQueueTimeoutUsesPendingReason proves the "why is it waiting" rule: a
// job that never gets an agent expires with its pending reason as error.
func TestQueueTimeoutUsesPendingReason(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: time.Minute})
	ctx := context.Background()
	f.addRun(t, "r1", 0)
	reason := "no agent with labels [gpu]"
	if _, err := f.st.UpdateJobStatus(ctx, "r1-build", []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &reason}); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(59 * time.Second)
	f.c.SweepQueue(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("before the timeout: %s", j.Status)
	}
	f.now = f.now.Add(2 * time.Second)
	f.c.SweepQueue(ctx)
	j := f.job(t, "r1-build")
	if j.Status != status.JobTimedOutStale || j.ErrorMessage != "queue timeout (1m0s) expired: "+reason {
		t.Errorf("expired job = %s %q", j.Status, j.ErrorMessage)
	}
	if l := f.job(t, "r1-lint"); l.ErrorMessage != "queue timeout (1m0s) expired: "+NeverDispatched {
		t.Errorf("job without a reason: %q", l.ErrorMessage)
	}
	q, _ := f.st.ListQueue(ctx, []string{store.QueueExpired})
	if len(q) != 2 {
		t.Errorf("expired entries = %d, want 2", len(q))
	}
	if r := f.run(t, "r1"); r.Status != status.RunFailed {
		t.Errorf("run = %s, want failed", r.Status)
	}
}

func TestDrainSnapshot(t *testing.T) {
	f := newFixture(t, Config{})
	if s := f.c.SetDraining(true); !s.Draining {
		t.Errorf("drain: %+v", s)
	}
	if s := f.c.SetDraining(false); s.Draining || f.dsp.draining {
		t.Errorf("resume: %+v", s)
	}
}
