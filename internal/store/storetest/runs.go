package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// ---------------------------------------------------------------- runs & jobs

func fullRun(id string, created time.Time) *store.Run {
	return &store.Run{ID: id, WorkflowName: "ci", Status: status.RunPending, Provider: provider.Local, RepoIdentifier: "org/repo",
		RepoURL: "file:///srv/repo", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567",
		DeliveryID: "generic:o:s:1", SourceID: "src", OrgID: "org", TriggeredBy: "alice", TimeoutMs: 3_600_000,
		TriggerType: apitypes.TriggerPullRequest, TargetBranch: "main", TrustTier: store.TrustUnknown, LockFileSource: "base",
		WorkflowOrigin: "org/policies@0123456789ab:.kici/workflows/lint.yaml", CreatedAt: created}
}

func testRunRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	run := fullRun("run-1", at(0))
	run.FailureReason = "preset"
	run.StartedAt = ptime(at(1))
	run.CompletedAt = ptime(at(2))
	run.DurationMs = pint64(1000)
	jobs := []*store.Job{
		{ID: "job-z", JobName: "zeta", BaseJobName: "zeta", Status: status.JobQueued, AgentID: "agent-1",
			Config:       json.RawMessage(`{"steps":[{"run":"echo hi"}],"timeout":"5m"}`),
			RunsOnLabels: []string{"linux", "docker"}, MatrixValues: map[string]string{"go": "1.22", "os": "linux"},
			Needs:        []store.Need{{Upstream: "alpha", RunOn: []status.Job{status.JobSuccess}}, {Upstream: "beta (1)", RunOn: []status.Job{}}, {Upstream: "gamma"}},
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
	if jobs[1].Status != status.JobPending || jobs[2].Status != status.JobPending {
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
	if r2.Status != status.RunPending || r2.CreatedAt.IsZero() {
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

	ok, err := s.UpdateRunStatus(ctx, "r", []status.Run{status.RunRunning}, status.RunSuccess, store.RunUpdate{})
	wantChanged(t, "pending→success with from=[running]", ok, err, false)
	ok, err = s.UpdateRunStatus(ctx, "r", []status.Run{status.RunPending}, status.RunRunning, store.RunUpdate{StartedAt: ptime(at(1))})
	wantChanged(t, "pending→running", ok, err, true)
	got, _ := s.GetRun(ctx, "r")
	if got.Status != status.RunRunning || got.StartedAt == nil || !got.StartedAt.Equal(at(1)) {
		t.Errorf("after start: %+v", got)
	}
	// Replay is a no-op.
	ok, err = s.UpdateRunStatus(ctx, "r", []status.Run{status.RunPending}, status.RunRunning, store.RunUpdate{StartedAt: ptime(at(9))})
	wantChanged(t, "replayed pending→running", ok, err, false)

	// FailureReason set once, never clobbered.
	ok, err = s.UpdateRunStatus(ctx, "r", nil, status.RunCancelling, store.RunUpdate{FailureReason: pstr("cancelled by bob")})
	wantChanged(t, "running→cancelling (nil from)", ok, err, true)
	ok, err = s.UpdateRunStatus(ctx, "r", nil, status.RunFailed, store.RunUpdate{FailureReason: pstr("Failed jobs: a"),
		CompletedAt: ptime(at(4)), DurationMs: pint64(3000)})
	wantChanged(t, "cancelling→failed (nil from)", ok, err, true)
	got, _ = s.GetRun(ctx, "r")
	want := fullRun("r", at(0))
	want.Status, want.FailureReason = status.RunFailed, "cancelled by bob"
	want.StartedAt, want.CompletedAt, want.DurationMs = ptime(at(1)), ptime(at(4)), pint64(3000)
	same(t, "run after failure", want, got)

	// Terminal is immutable for nil from.
	for _, to := range []status.Run{status.RunRunning, status.RunSuccess, status.RunCancelled} {
		ok, err = s.UpdateRunStatus(ctx, "r", nil, to, store.RunUpdate{FailureReason: pstr("x"), CompletedAt: ptime(at(99))})
		wantChanged(t, "terminal failed→"+string(to)+" (nil from)", ok, err, false)
	}
	got, _ = s.GetRun(ctx, "r")
	same(t, "terminal run untouched", want, got)

	// An explicit from naming the terminal status is honoured.
	ok, err = s.UpdateRunStatus(ctx, "r", []status.Run{status.RunFailed}, status.RunSuccess, store.RunUpdate{})
	wantChanged(t, "explicit failed→success", ok, err, true)

	// FailureReason on a run without one is written; nil leaves it.
	must(t, s.CreateRun(ctx, fullRun("r2", at(0)), nil))
	ok, err = s.UpdateRunStatus(ctx, "r2", []status.Run{status.RunPending}, status.RunRunning, store.RunUpdate{})
	wantChanged(t, "r2 start", ok, err, true)
	ok, err = s.UpdateRunStatus(ctx, "r2", []status.Run{status.RunRunning}, status.RunFailed, store.RunUpdate{FailureReason: pstr("Failed jobs: build")})
	wantChanged(t, "r2 fail", ok, err, true)
	got, _ = s.GetRun(ctx, "r2")
	if got.FailureReason != "Failed jobs: build" || got.StartedAt != nil {
		t.Errorf("r2: reason %q startedAt %v", got.FailureReason, got.StartedAt)
	}

	ok, err = s.UpdateRunStatus(ctx, "missing", nil, status.RunRunning, store.RunUpdate{})
	wantChanged(t, "unknown run", ok, err, false)
}

// testMoveRun: MoveRun changes like UpdateRunStatus and returns the row
// as a read after it would; nil when the from-set does not match.
func testMoveRun(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), nil))
	got, err := s.MoveRun(ctx, "r", []status.Run{status.RunRunning}, status.RunSuccess, store.RunUpdate{})
	if err != nil || got != nil {
		t.Fatalf("pending→success with from=[running]: %v, %v; want nil, nil", got, err)
	}
	ok, err := s.UpdateRunStatus(ctx, "r", nil, status.RunCancelling, store.RunUpdate{FailureReason: pstr("cancelled by bob")})
	wantChanged(t, "pending→cancelling", ok, err, true)
	got, err = s.MoveRun(ctx, "r", nil, status.RunFailed, store.RunUpdate{FailureReason: pstr("Failed jobs: a"),
		CompletedAt: ptime(at(4)), DurationMs: pint64(3000)})
	must(t, err)
	read, err := s.GetRun(ctx, "r")
	must(t, err)
	same(t, "moved row = row read back", read, got)
	if got == nil || got.Status != status.RunFailed || got.FailureReason != "cancelled by bob" || got.DurationMs == nil || *got.DurationMs != 3000 {
		t.Fatalf("moved run = %+v", got)
	}
	got, err = s.MoveRun(ctx, "missing", nil, status.RunRunning, store.RunUpdate{})
	if err != nil || got != nil {
		t.Fatalf("unknown run: %v, %v; want nil, nil", got, err)
	}
}

// testMoveJob: MoveJob changes like UpdateJobStatus and returns the row
// as a read after it would; nil when the from-set does not match.
func testMoveJob(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{{ID: "j", JobName: "build", RunsOnLabels: []string{"linux"},
		Needs: []store.Need{}, MatrixValues: map[string]string{"os": "linux"}}}))
	got, err := s.MoveJob(ctx, "j", []status.Job{status.JobQueued}, status.JobRunning, store.JobUpdate{})
	if err != nil || got != nil {
		t.Fatalf("pending→running with from=[queued]: %v, %v; want nil, nil", got, err)
	}
	got, err = s.MoveJob(ctx, "j", []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{PendingReason: pstr("no agent online")})
	must(t, err)
	read, err := s.GetJob(ctx, "j")
	must(t, err)
	same(t, "moved row = row read back", read, got)
	if got == nil || got.Status != status.JobQueued || got.PendingReason != "no agent online" {
		t.Fatalf("moved job = %+v", got)
	}
	got, err = s.MoveJob(ctx, "missing", nil, status.JobQueued, store.JobUpdate{})
	if err != nil || got != nil {
		t.Fatalf("unknown job: %v, %v; want nil, nil", got, err)
	}

	// StartedAtIfUnset sets a start time only where there is none; an
	// explicit StartedAt wins.
	first, later := at(10), at(20)
	got, err = s.MoveJob(ctx, "j", []status.Job{status.JobQueued}, status.JobRunning, store.JobUpdate{StartedAtIfUnset: &first})
	must(t, err)
	if got == nil || got.StartedAt == nil || !got.StartedAt.Equal(first) {
		t.Fatalf("first start: %+v; want started at %v", got, first)
	}
	got, err = s.MoveJob(ctx, "j", []status.Job{status.JobRunning}, status.JobRecovering, store.JobUpdate{StartedAtIfUnset: &later})
	must(t, err)
	if got == nil || got.StartedAt == nil || !got.StartedAt.Equal(first) {
		t.Fatalf("start reported again: %+v; want the first start %v kept", got, first)
	}
	got, err = s.MoveJob(ctx, "j", []status.Job{status.JobRecovering}, status.JobRunning, store.JobUpdate{StartedAt: &later, StartedAtIfUnset: &first})
	must(t, err)
	if got == nil || got.StartedAt == nil || !got.StartedAt.Equal(later) {
		t.Fatalf("explicit start: %+v; want %v", got, later)
	}
}

// testSetPendingReasons: a batch of reasons lands on the queued jobs; a
// non-empty reason skips a job no longer queued, a cleared one ("")
// lands whatever the status; unknown ids are skipped.
func testSetPendingReasons(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	jobs := []*store.Job{
		{ID: "q1", JobName: "a", Status: status.JobQueued},
		{ID: "q2", JobName: "b", Status: status.JobQueued, PendingReason: "no agent online"},
		{ID: "r1", JobName: "c", Status: status.JobRunning, PendingReason: "all matching agents busy"},
		{ID: "r2", JobName: "d", Status: status.JobRunning},
	}
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), jobs))
	must(t, s.SetPendingReasons(ctx, nil))
	must(t, s.SetPendingReasons(ctx, map[string]string{
		"q1": "spawning agent a-1", "q2": "", "r1": "", "r2": "no agent online", "missing": "draining"}))
	want := map[string]string{"q1": "spawning agent a-1", "q2": "", "r1": "", "r2": ""}
	for id, reason := range want {
		got, err := s.GetJob(ctx, id)
		must(t, err)
		if got.PendingReason != reason {
			t.Errorf("job %s (%s) reason %q, want %q", id, got.Status, got.PendingReason, reason)
		}
	}
	many := map[string]string{}
	var batch []*store.Job
	for i := range 300 {
		id := fmt.Sprintf("m%03d", i)
		batch = append(batch, &store.Job{ID: id, JobName: id, Status: status.JobQueued})
		many[id] = fmt.Sprintf("reason %d", i)
	}
	must(t, s.CreateRun(ctx, fullRun("r-many", at(1)), batch))
	must(t, s.SetPendingReasons(ctx, many))
	for _, id := range []string{"m000", "m150", "m299"} {
		got, err := s.GetJob(ctx, id)
		must(t, err)
		if got.PendingReason != many[id] {
			t.Errorf("job %s reason %q, want %q", id, got.PendingReason, many[id])
		}
	}
}

func testJobTransitions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{{ID: "j", JobName: "build", RunsOnLabels: []string{"linux"}}}))

	ok, err := s.UpdateJobStatus(ctx, "j", []status.Job{status.JobQueued}, status.JobRunning, store.JobUpdate{})
	wantChanged(t, "pending→running with from=[queued]", ok, err, false)
	ok, err = s.UpdateJobStatus(ctx, "j", []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{PendingReason: pstr("no agent online")})
	wantChanged(t, "pending→queued", ok, err, true)
	ok, err = s.UpdateJobStatus(ctx, "j", []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: pstr("all matching agents busy")})
	wantChanged(t, "queued→queued reason", ok, err, true)

	wantErr(t, "heartbeat of queued job", s.TouchJobHeartbeat(ctx, "j", at(2)), store.ErrNotFound)
	ok, err = s.UpdateJobStatus(ctx, "j", []status.Job{status.JobPending, status.JobQueued, status.JobRecovering}, status.JobRunning, store.JobUpdate{
		AgentID: pstr("agent-7"), StartedAt: ptime(at(1)), LastHeartbeatAt: ptime(at(1))})
	wantChanged(t, "queued→running", ok, err, true)
	must(t, s.TouchJobHeartbeat(ctx, "j", at(3)))
	got, _ := s.GetJob(ctx, "j")
	if got.LastHeartbeatAt == nil || !got.LastHeartbeatAt.Equal(at(3)) {
		t.Errorf("heartbeat = %v", got.LastHeartbeatAt)
	}
	wantErr(t, "heartbeat of unknown job", s.TouchJobHeartbeat(ctx, "missing", at(3)), store.ErrNotFound)

	ok, err = s.UpdateJobStatus(ctx, "j", nil, status.JobFailed, store.JobUpdate{ErrorMessage: pstr("exit 1"),
		CompletedAt: ptime(at(5)), DurationMs: pint64(4000)})
	wantChanged(t, "running→failed (nil from)", ok, err, true)
	want := &store.Job{ID: "j", RunID: "r", JobName: "build", Status: status.JobFailed, AgentID: "agent-7",
		RunsOnLabels: []string{"linux"}, ErrorMessage: "exit 1", PendingReason: "all matching agents busy",
		CreatedAt: at(0), StartedAt: ptime(at(1)), CompletedAt: ptime(at(5)), DurationMs: pint64(4000),
		LastHeartbeatAt: ptime(at(3))}
	got, _ = s.GetJob(ctx, "j")
	same(t, "job after failure", want, got)

	for _, to := range []status.Job{status.JobRunning, status.JobSuccess, status.JobCancelled, status.JobTimedOutStale} {
		ok, err = s.UpdateJobStatus(ctx, "j", nil, to, store.JobUpdate{ErrorMessage: pstr("late"), AgentID: pstr("other")})
		wantChanged(t, "terminal failed→"+string(to)+" (nil from)", ok, err, false)
	}
	wantErr(t, "heartbeat of failed job", s.TouchJobHeartbeat(ctx, "j", at(9)), store.ErrNotFound)
	got, _ = s.GetJob(ctx, "j")
	same(t, "terminal job untouched", want, got)

	// Every terminal job status is immutable under nil from.
	var jobs []*store.Job
	for i, st := range status.TerminalJobs() {
		jobs = append(jobs, &store.Job{ID: fmt.Sprintf("t%d", i), JobName: string(st), Status: st})
	}
	must(t, s.CreateRun(ctx, fullRun("r2", at(1)), jobs))
	for _, j := range jobs {
		ok, err = s.UpdateJobStatus(ctx, j.ID, nil, status.JobQueued, store.JobUpdate{})
		wantChanged(t, "terminal "+string(j.Status)+"→queued", ok, err, false)
	}
	// Every non-terminal status moves under nil from.
	var live []*store.Job
	for i, st := range []status.Job{status.JobPending, status.JobQueued, status.JobRunning, status.JobRecovering, status.JobCancelling} {
		live = append(live, &store.Job{ID: fmt.Sprintf("n%d", i), JobName: string(st), Status: st})
	}
	must(t, s.CreateRun(ctx, fullRun("r3", at(2)), live))
	for _, j := range live {
		ok, err = s.UpdateJobStatus(ctx, j.ID, nil, status.JobCancelled, store.JobUpdate{})
		wantChanged(t, "non-terminal "+string(j.Status)+"→cancelled", ok, err, true)
	}
	ok, err = s.UpdateJobStatus(ctx, "missing", nil, status.JobRunning, store.JobUpdate{})
	wantChanged(t, "unknown job", ok, err, false)
}

func testListJobsByStatus(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r2", at(10)), []*store.Job{
		{ID: "b1", JobName: "x", Status: status.JobQueued}, {ID: "b2", JobName: "y", Status: status.JobPending}}))
	must(t, s.CreateRun(ctx, fullRun("r1", at(0)), []*store.Job{
		{ID: "a1", JobName: "x", Status: status.JobRunning}, {ID: "a2", JobName: "y", Status: status.JobQueued}, {ID: "a3", JobName: "z", Status: status.JobSuccess}}))
	got, err := s.ListJobsByStatus(ctx, []status.Job{status.JobQueued, status.JobRunning})
	must(t, err)
	same(t, "ListJobsByStatus", []string{"a1", "a2", "b1"}, ids(got, func(x *store.Job) string { return x.ID }))
	got, err = s.ListJobsByStatus(ctx, []status.Job{status.JobPending})
	must(t, err)
	same(t, "ListJobsByStatus pending", []string{"b2"}, ids(got, func(x *store.Job) string { return x.ID }))
	got, err = s.ListJobsByStatus(ctx, []status.Job{status.JobSkipped})
	must(t, err)
	if len(got) != 0 {
		t.Errorf("ListJobsByStatus skipped: %d", len(got))
	}
}

// ---------------------------------------------------------------- steps

func testSteps(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{{ID: "j", JobName: "build"}, {ID: "k", JobName: "other"}}))

	s1 := &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "test", Status: status.StepRunning, StartedAt: ptime(at(1))}
	s0 := &store.Step{RunID: "r", JobID: "j", StepIndex: 0, StepName: "checkout", Status: status.StepSuccess, ExitCode: pint(0),
		LogBytes: 120, StartedAt: ptime(at(0)), CompletedAt: ptime(at(1)), DurationMs: pint64(1000)}
	must(t, s.UpsertStep(ctx, s1))
	must(t, s.UpsertStep(ctx, s0))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: status.StepPending}))
	got, err := s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "ListSteps", []*store.Step{s0, s1}, got)

	// running → failed fills the fields and keeps the start.
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 1, Status: status.StepFailed, ExitCode: pint(2),
		ErrorMessage: "exit status 2", LogBytes: 4096, CompletedAt: ptime(at(3)), DurationMs: pint64(2000)}))
	want1 := &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "test", Status: status.StepFailed, ExitCode: pint(2),
		ErrorMessage: "exit status 2", LogBytes: 4096, StartedAt: ptime(at(1)), CompletedAt: ptime(at(3)), DurationMs: pint64(2000)}
	got, err = s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "step after completion", []*store.Step{s0, want1}, got)

	// A late "running" replay never reverts a terminal step, nor clobbers it.
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 1, StepName: "renamed", Status: status.StepRunning,
		ExitCode: pint(0), ErrorMessage: "other", LogBytes: 10, StartedAt: ptime(at(50))}))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "j", StepIndex: 0, Status: status.StepPending}))
	got, err = s.ListSteps(ctx, "j")
	must(t, err)
	same(t, "terminal steps after late non-terminal reports", []*store.Step{s0, want1}, got)

	// pending → running → success on another step.
	k := &store.Step{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: status.StepRunning, StartedAt: ptime(at(4))}
	must(t, s.UpsertStep(ctx, k))
	must(t, s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "k", StepIndex: 0, Status: status.StepSuccess, ExitCode: pint(0),
		LogBytes: 7, CompletedAt: ptime(at(5)), DurationMs: pint64(1000)}))
	got, err = s.ListSteps(ctx, "k")
	must(t, err)
	same(t, "k steps", []*store.Step{{RunID: "r", JobID: "k", StepIndex: 0, StepName: "k0", Status: status.StepSuccess,
		ExitCode: pint(0), LogBytes: 7, StartedAt: ptime(at(4)), CompletedAt: ptime(at(5)), DurationMs: pint64(1000)}}, got)

	none, err := s.ListSteps(ctx, "missing")
	must(t, err)
	if len(none) != 0 {
		t.Errorf("ListSteps unknown job: %d", len(none))
	}
	err = s.UpsertStep(ctx, &store.Step{RunID: "r", JobID: "missing", StepIndex: 0, Status: status.StepRunning})
	wantErr(t, "UpsertStep unknown job", err, store.ErrNotFound)
}

// testReleaseJob: a pending job moves to queued with its queue entry
// stored; a job not pending is left alone and nothing is queued for it;
// an entry already there is kept and reported as not stored.
func testReleaseJob(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("rel", at(0)), []*store.Job{
		{ID: "rel-a", JobName: "a", RunsOnLabels: []string{"linux"}, Needs: []store.Need{}},
		{ID: "rel-b", JobName: "b", Needs: []store.Need{}},
		{ID: "rel-c", JobName: "c", Needs: []store.Need{}},
	}))
	entry := func(id string) *store.QueueEntry {
		return &store.QueueEntry{ID: id, RunID: "rel", JobName: id, RunsOnLabels: []string{"linux"}, ExcludeLabels: []string{"gpu"}, CreatedAt: at(1)}
	}
	got, stored, err := s.ReleaseJob(ctx, "rel-a", entry("rel-a"))
	must(t, err)
	read, err := s.GetJob(ctx, "rel-a")
	must(t, err)
	same(t, "released row = row read back", read, got)
	if got == nil || got.Status != status.JobQueued || !stored {
		t.Fatalf("released job = %+v, entry stored %v; want queued and stored", got, stored)
	}
	e, err := s.GetQueueEntry(ctx, "rel-a")
	must(t, err)
	if e.Status != store.QueuePending || e.RunID != "rel" || len(e.RunsOnLabels) != 1 || e.RunsOnLabels[0] != "linux" ||
		len(e.ExcludeLabels) != 1 || e.ExcludeLabels[0] != "gpu" || !e.CreatedAt.Equal(at(1)) {
		t.Fatalf("queue entry = %+v", e)
	}

	// Released again (no longer pending): nothing changes, nothing queued.
	got, stored, err = s.ReleaseJob(ctx, "rel-a", entry("rel-a-twice"))
	if err != nil || got != nil || stored {
		t.Fatalf("releasing a queued job = %+v, %v, %v; want nil, false, nil", got, stored, err)
	}
	_, err = s.GetQueueEntry(ctx, "rel-a-twice")
	wantErr(t, "entry of a refused release", err, store.ErrNotFound)
	got, stored, err = s.ReleaseJob(ctx, "rel-missing", entry("rel-missing"))
	if err != nil || got != nil || stored {
		t.Fatalf("releasing an unknown job = %+v, %v, %v; want nil, false, nil", got, stored, err)
	}

	// An entry already queued under the job's id (a recovery got there
	// first) is kept: the job still moves, the entry is not stored.
	must(t, s.Enqueue(ctx, &store.QueueEntry{ID: "rel-b", RunID: "rel", JobName: "b", CreatedAt: at(0)}))
	got, stored, err = s.ReleaseJob(ctx, "rel-b", entry("rel-b"))
	if err != nil || got == nil || got.Status != status.JobQueued || stored {
		t.Fatalf("releasing a job with an entry = %+v, stored %v, %v; want the queued job, not stored", got, stored, err)
	}
	if e, err := s.GetQueueEntry(ctx, "rel-b"); err != nil || len(e.RunsOnLabels) != 0 || !e.CreatedAt.Equal(at(0)) {
		t.Fatalf("existing entry after the release = %+v, %v; want it unchanged", e, err)
	}

	// Entries released one after the other in the same millisecond keep
	// their order in the queue, after the older entry.
	must(t, func() error { _, _, err := s.ReleaseJob(ctx, "rel-c", entry("rel-c")); return err }())
	for _, want := range []string{"rel-b", "rel-a", "rel-c"} {
		next, err := s.ClaimNext(ctx, "agent", []string{"linux"}, at(60))
		must(t, err)
		if next == nil || next.ID != want {
			t.Fatalf("claimed entry = %+v; want %s (order: oldest, then release order)", next, want)
		}
	}
}
