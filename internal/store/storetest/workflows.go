package storetest

import (
	"testing"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testWorkflowData covers job outputs and run contexts: round trip,
// replacement, per-run listing and ErrNotFound for unknown rows.
func testWorkflowData(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("wd-run", at(0)), []*store.Job{
		{ID: "wd-a", JobName: "a", BaseJobName: "a"}, {ID: "wd-b", JobName: "b", BaseJobName: "b"}}))
	must(t, s.CreateRun(ctx, fullRun("wd-other", at(0)), []*store.Job{{ID: "wd-o", JobName: "a", BaseJobName: "a"}}))

	got, err := s.ListJobOutputs(ctx, "wd-run")
	must(t, err)
	same(t, "ListJobOutputs empty", map[string]map[string]string{}, got)

	must(t, s.PutJobOutputs(ctx, "wd-a", map[string]string{"version": "1.2.3", "notes": "line 1\nline 2 ✓"}))
	must(t, s.PutJobOutputs(ctx, "wd-a", map[string]string{"version": "1.2.4"}))
	must(t, s.PutJobOutputs(ctx, "wd-o", map[string]string{"x": "y"}))
	got, err = s.ListJobOutputs(ctx, "wd-run")
	must(t, err)
	same(t, "ListJobOutputs", map[string]map[string]string{"wd-a": {"version": "1.2.4"}}, got)
	wantErr(t, "PutJobOutputs unknown job", s.PutJobOutputs(ctx, "missing", map[string]string{"a": "b"}), store.ErrNotFound)

	_, err = s.GetRunContext(ctx, "wd-run")
	wantErr(t, "GetRunContext none", err, store.ErrNotFound)
	rc := &store.RunContext{Inputs: map[string]any{"target": "prod", "count": 3.0, "dry": true}, ChangedPaths: []string{"go.mod", "docs/a b.md"}}
	must(t, s.PutRunContext(ctx, "wd-run", rc))
	back, err := s.GetRunContext(ctx, "wd-run")
	must(t, err)
	same(t, "GetRunContext", rc, back)
	must(t, s.PutRunContext(ctx, "wd-run", &store.RunContext{}))
	back, err = s.GetRunContext(ctx, "wd-run")
	must(t, err)
	same(t, "GetRunContext replaced", &store.RunContext{}, back)
	wantErr(t, "PutRunContext unknown run", s.PutRunContext(ctx, "missing", rc), store.ErrNotFound)
}

// testDispatchRows covers DispatchRows: the same rows as the reads it
// stands for (GetRun, ListJobs, GetRunContext, ListJobOutputs), the job
// picked from its run's jobs, no context as nil, and ErrNotFound for an
// unknown run or a job of another run.
func testDispatchRows(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.CreateRun(ctx, fullRun("dr-run", at(0)), []*store.Job{
		{ID: "dr-build", JobName: "build (1.22)", BaseJobName: "build", MatrixValues: map[string]string{"go": "1.22"},
			Config: []byte(`{"steps":[{"run":"make"}]}`), RunsOnLabels: []string{"linux"}},
		{ID: "dr-test", JobName: "test", BaseJobName: "test", Needs: []store.Need{{Upstream: "build"}}}}))
	must(t, s.CreateRun(ctx, fullRun("dr-other", at(0)), []*store.Job{{ID: "dr-o", JobName: "a", BaseJobName: "a"}}))

	// A job with its nullable columns set: started, heartbeat, duration.
	started, dur, agent := at(5), int64(1500), "agent-1"
	if _, err := s.UpdateJobStatus(ctx, "dr-build", nil, status.JobRunning,
		store.JobUpdate{StartedAt: &started, LastHeartbeatAt: &started, DurationMs: &dur, AgentID: &agent}); err != nil {
		t.Fatal(err)
	}
	got, err := s.DispatchRows(ctx, "dr-run", "dr-test")
	must(t, err)
	run, err := s.GetRun(ctx, "dr-run")
	must(t, err)
	jobs, err := s.ListJobs(ctx, "dr-run")
	must(t, err)
	same(t, "DispatchRows run", run, got.Run)
	same(t, "DispatchRows jobs", jobs, got.Jobs)
	same(t, "DispatchRows job", jobs[1], got.Job)
	if got.Context != nil {
		t.Errorf("DispatchRows context of a run without one = %+v, want nil", got.Context)
	}
	same(t, "DispatchRows outputs, none yet", map[string]map[string]string{}, got.Outputs)

	rc := &store.RunContext{Inputs: map[string]any{"target": "prod"}, ChangedPaths: []string{"go.mod"}}
	must(t, s.PutRunContext(ctx, "dr-run", rc))
	must(t, s.PutJobOutputs(ctx, "dr-build", map[string]string{"version": "1.2.3"}))
	must(t, s.PutJobOutputs(ctx, "dr-o", map[string]string{"x": "y"}))
	got, err = s.DispatchRows(ctx, "dr-run", "dr-build")
	must(t, err)
	same(t, "DispatchRows job", jobs[0], got.Job)
	if got.Job.StartedAt == nil || !got.Job.StartedAt.Equal(started) || got.Job.MatrixValues["go"] != "1.22" {
		t.Errorf("DispatchRows job = %+v, want it started at %v with its matrix values", got.Job, started)
	}
	same(t, "DispatchRows context", rc, got.Context)
	same(t, "DispatchRows outputs", map[string]map[string]string{"dr-build": {"version": "1.2.3"}}, got.Outputs)

	_, err = s.DispatchRows(ctx, "missing", "dr-build")
	wantErr(t, "DispatchRows unknown run", err, store.ErrNotFound)
	_, err = s.DispatchRows(ctx, "dr-run", "dr-o")
	wantErr(t, "DispatchRows job of another run", err, store.ErrNotFound)
	_, err = s.DispatchRows(ctx, "dr-run", "missing")
	wantErr(t, "DispatchRows unknown job", err, store.ErrNotFound)
}
