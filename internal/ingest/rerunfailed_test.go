package ingest

import (
	"errors"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// TestRerunFailedKeepsSucceededJobs: rerun --failed runs the failed matrix
// leg and what depends on it again; the jobs that succeeded outside that
// set are carried over as succeeded, outputs included.
func TestRerunFailedKeepsSucceededJobs(t *testing.T) {
	h := newHarness(t)
	orig, failedLeg, okLeg := finishedRun(t, h)

	re, err := h.proc.RerunFailed(h.ctx, orig.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.st.ListJobs(h.ctx, re.ID)
	if err != nil {
		t.Fatal(err)
	}
	outs, _ := h.st.ListJobOutputs(h.ctx, re.ID)
	by := map[string]*store.Job{}
	for _, j := range got {
		by[j.JobName] = j
	}
	for _, name := range []string{"build", okLeg} {
		if j := by[name]; j.Status != status.JobSuccess || j.ErrorMessage != runs.CarriedOverPrefix+orig.ID {
			t.Errorf("%s = %s %q, want carried over", name, j.Status, j.ErrorMessage)
		}
	}
	if outs[by["build"].ID]["version"] != "1.2.3" {
		t.Errorf("carried outputs = %v", outs)
	}
	if j := by[failedLeg]; j.Status != status.JobQueued {
		t.Errorf("failed leg %s = %s, want queued again", failedLeg, j.Status)
	}
	if j := by["deploy"]; j.Status != status.JobPending {
		t.Errorf("deploy = %s, want pending (it needs the rerun leg)", j.Status)
	}
}

// finishedRun makes a finished "ci" run (testLock): build succeeded with
// output version=1.2.3, one test leg failed (failedLeg), the other
// succeeded (okLeg), deploy was skipped.
func finishedRun(t *testing.T, h *harness) (orig *store.Run, failedLeg, okLeg string) {
	t.Helper()
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", "", c1)
	h.process(id)
	orig = h.runsOf(id)["ci"]
	jobs, err := h.st.ListJobs(h.ctx, orig.ID)
	if err != nil || len(jobs) != 4 {
		t.Fatalf("jobs = %d, %v", len(jobs), err)
	}
	for _, j := range jobs {
		st := status.JobSuccess
		switch {
		case j.BaseJobName == "test" && failedLeg == "":
			st, failedLeg = status.JobFailed, j.JobName
		case j.BaseJobName == "test":
			okLeg = j.JobName
		case j.JobName == "deploy":
			st = status.JobSkipped
		}
		if _, err := h.st.UpdateJobStatus(h.ctx, j.ID, nil, st, store.JobUpdate{}); err != nil {
			t.Fatal(err)
		}
		if j.JobName == "build" {
			if err := h.st.PutJobOutputs(h.ctx, j.ID, map[string]string{"version": "1.2.3"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.st.UpdateRunStatus(h.ctx, orig.ID, nil, status.RunFailed, store.RunUpdate{}); err != nil {
		t.Fatal(err)
	}
	return orig, failedLeg, okLeg
}

// jobsByName lists the jobs of run runID by job name, with their outputs.
func jobsByName(t *testing.T, h *harness, runID string) (map[string]*store.Job, map[string]map[string]string) {
	t.Helper()
	got, err := h.st.ListJobs(h.ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := h.st.ListJobOutputs(h.ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*store.Job{}
	for _, j := range got {
		by[j.JobName] = j
	}
	return by, outs
}

// TestRerunJobsRerunsTheChosenJobAndItsDependents: rerunning one matrix
// leg (a GitHub check's "Re-run") runs that leg and deploy (which needs
// it) again; the other jobs keep the results they had, a failure
// included, and build its outputs. Rerunning build reruns every job.
func TestRerunJobsRerunsTheChosenJobAndItsDependents(t *testing.T) {
	h := newHarness(t)
	orig, failedLeg, okLeg := finishedRun(t, h)

	re, err := h.proc.RerunJobs(h.ctx, orig.ID, "github:alice", []string{okLeg})
	if err != nil {
		t.Fatal(err)
	}
	by, outs := jobsByName(t, h, re.ID)
	if len(by) != 4 {
		t.Fatalf("rerun has %d jobs, want 4", len(by))
	}
	for name, want := range map[string]status.Job{"build": status.JobSuccess, failedLeg: status.JobFailed} {
		if j := by[name]; j.Status != want || j.ErrorMessage != runs.CarriedOverPrefix+orig.ID {
			t.Errorf("%s = %s %q, want %s carried over", name, j.Status, j.ErrorMessage, want)
		}
	}
	if outs[by["build"].ID]["version"] != "1.2.3" {
		t.Errorf("carried outputs = %v", outs)
	}
	if j := by[okLeg]; j.Status != status.JobQueued || j.ErrorMessage != "" {
		t.Errorf("chosen leg %s = %s %q, want queued again", okLeg, j.Status, j.ErrorMessage)
	}
	// deploy is run again (it needs the rerun leg), but the other leg's
	// kept failure already decides its needs: skipped, not carried over.
	if j := by["deploy"]; j.Status != status.JobSkipped || strings.HasPrefix(j.ErrorMessage, runs.CarriedOverPrefix) {
		t.Errorf("deploy = %s %q, want skipped anew (the kept failure fails its needs)", j.Status, j.ErrorMessage)
	}
	if re.TriggerType != TriggerTypeRerun || re.TriggeredBy != "github:alice" {
		t.Errorf("rerun trigger %q by %q", re.TriggerType, re.TriggeredBy)
	}

	// Rerunning the root job reruns everything downstream of it.
	re2, err := h.proc.RerunJobs(h.ctx, orig.ID, "alice", []string{"build"})
	if err != nil {
		t.Fatal(err)
	}
	by2, _ := jobsByName(t, h, re2.ID)
	for name, j := range by2 {
		want := status.JobPending
		if name == "build" {
			want = status.JobQueued
		}
		if j.Status != want || j.ErrorMessage != "" {
			t.Errorf("after rerunning build, %s = %s %q, want %s", name, j.Status, j.ErrorMessage, want)
		}
	}
}

// TestRerunJobsRefusesAnUnknownJob: a job name the run does not have is
// an error naming it, and no run is created.
func TestRerunJobsRefusesAnUnknownJob(t *testing.T) {
	h := newHarness(t)
	orig, _, _ := finishedRun(t, h)
	before, _, err := h.st.ListRuns(h.ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.proc.RerunJobs(h.ctx, orig.ID, "alice", []string{"lint"})
	if !errors.Is(err, ErrUnknownJob) || !strings.Contains(err.Error(), `"lint"`) {
		t.Fatalf("err = %v, want ErrUnknownJob naming lint", err)
	}
	after, _, err := h.st.ListRuns(h.ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("%d runs after the refused rerun, want %d", len(after), len(before))
	}
}
