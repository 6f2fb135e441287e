package storetest

import (
	"testing"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testStartJob: StartJob moves the job and, on its run's first start, the
// run; a job that does not move (unknown, running, terminal) writes
// nothing, and a run keeps the start time it has (running, or held after
// it ran).
func testStartJob(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	newJob := func(id string) *store.Job {
		return &store.Job{ID: id, JobName: id, RunsOnLabels: []string{"linux"}, Needs: []store.Need{}}
	}
	must(t, s.CreateRun(ctx, fullRun("r", at(0)), []*store.Job{newJob("a"), newJob("b"), newJob("c"), newJob("done")}))
	runNow := func() *store.Run {
		t.Helper()
		r, err := s.GetRun(ctx, "r")
		must(t, err)
		return r
	}
	start := func(id, agent string, sec int) *store.Job {
		t.Helper()
		when := at(sec)
		got, err := s.StartJob(ctx, id, store.JobUpdate{AgentID: &agent, StartedAtIfUnset: &when, LastHeartbeatAt: &when}, when)
		must(t, err)
		return got
	}

	if got := start("missing", "agent-1", 5); got != nil {
		t.Fatalf("unknown job started: %+v; want nil", got)
	}
	if r := runNow(); r.Status != status.RunPending || r.StartedAt != nil {
		t.Fatalf("run after an unknown job's start = %s, started %v; want pending, unstarted", r.Status, r.StartedAt)
	}
	_, err := s.UpdateJobStatus(ctx, "done", nil, status.JobSuccess, store.JobUpdate{})
	must(t, err)
	if got := start("done", "agent-1", 6); got != nil {
		t.Fatalf("finished job started: %+v; want nil", got)
	}
	if r := runNow(); r.Status != status.RunPending {
		t.Fatalf("run after a finished job's start = %s; want pending", r.Status)
	}
	if j, err := s.GetJob(ctx, "done"); err != nil || j.Status != status.JobSuccess || j.AgentID != "" || j.StartedAt != nil {
		t.Fatalf("finished job after a start = %+v, %v; want unchanged", j, err)
	}
	_, err = s.UpdateJobStatus(ctx, "a", []status.Job{status.JobPending}, status.JobQueued, store.JobUpdate{})
	must(t, err)

	got := start("a", "agent-1", 10)
	read, err := s.GetJob(ctx, "a")
	must(t, err)
	same(t, "started row = row read back", read, got)
	if got == nil || got.Status != status.JobRunning || got.AgentID != "agent-1" || got.StartedAt == nil || !got.StartedAt.Equal(at(10)) {
		t.Fatalf("started job = %+v; want running on agent-1 since %v", got, at(10))
	}
	if r := runNow(); r.Status != status.RunRunning || r.StartedAt == nil || !r.StartedAt.Equal(at(10)) {
		t.Fatalf("run after its first job's start = %s, started %v; want running since %v", r.Status, r.StartedAt, at(10))
	}

	if again := start("a", "agent-2", 15); again != nil {
		t.Fatalf("running job started again: %+v; want nil", again)
	}
	if j, err := s.GetJob(ctx, "a"); err != nil || j.AgentID != "agent-1" || j.StartedAt == nil || !j.StartedAt.Equal(at(10)) {
		t.Fatalf("job after a repeated start = %+v, %v; want unchanged", j, err)
	}

	if got := start("b", "agent-2", 20); got == nil || got.Status != status.JobRunning {
		t.Fatalf("second job = %+v; want running", got)
	}
	if r := runNow(); r.Status != status.RunRunning || r.StartedAt == nil || !r.StartedAt.Equal(at(10)) {
		t.Fatalf("run after its second job's start = %s, started %v; want running since %v", r.Status, r.StartedAt, at(10))
	}

	// Held after it ran (an approval gate), the run goes back to running
	// with its first start time when another job starts.
	_, err = s.UpdateRunStatus(ctx, "r", []status.Run{status.RunRunning}, status.RunHeld, store.RunUpdate{})
	must(t, err)
	if got := start("c", "agent-3", 30); got == nil || got.Status != status.JobRunning {
		t.Fatalf("job of a held run = %+v; want running", got)
	}
	if r := runNow(); r.Status != status.RunRunning || r.StartedAt == nil || !r.StartedAt.Equal(at(10)) {
		t.Fatalf("held run after a job's start = %s, started %v; want running since %v", r.Status, r.StartedAt, at(10))
	}
}
