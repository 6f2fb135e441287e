package pipeline

import (
	"testing"

	"kici.dev/kici/internal/execution"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// TestRerunFailedKeepsSucceededJobs: rerun --failed runs the failed matrix
// leg and what depends on it again; the jobs that succeeded outside that
// set are carried over as succeeded, outputs included.
func TestRerunFailedKeepsSucceededJobs(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", "", c1)
	h.process(id)
	orig := h.runsOf(id)["ci"]
	jobs, err := h.st.ListJobs(h.ctx, orig.ID)
	if err != nil || len(jobs) != 4 {
		t.Fatalf("jobs = %d, %v", len(jobs), err)
	}
	status := map[string]string{}
	var failedLeg, okLeg string
	for _, j := range jobs {
		st := execution.StatusSuccess
		switch {
		case j.BaseJobName == "test" && failedLeg == "":
			st, failedLeg = execution.StatusFailed, j.JobName
		case j.BaseJobName == "test":
			okLeg = j.JobName
		case j.JobName == "deploy":
			st = execution.StatusSkipped
		}
		status[j.JobName] = st
		if _, err := h.st.UpdateJobStatus(h.ctx, j.ID, nil, st, store.JobUpdate{}); err != nil {
			t.Fatal(err)
		}
		if j.JobName == "build" {
			if err := h.st.PutJobOutputs(h.ctx, j.ID, map[string]string{"version": "1.2.3"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.st.UpdateRunStatus(h.ctx, orig.ID, nil, "failed", store.RunUpdate{}); err != nil {
		t.Fatal(err)
	}

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
		if j := by[name]; j.Status != execution.StatusSuccess || j.ErrorMessage != execution.CarriedOverPrefix+orig.ID {
			t.Errorf("%s = %s %q, want carried over", name, j.Status, j.ErrorMessage)
		}
	}
	if outs[by["build"].ID]["version"] != "1.2.3" {
		t.Errorf("carried outputs = %v", outs)
	}
	if j := by[failedLeg]; j.Status != execution.StatusQueued {
		t.Errorf("failed leg %s = %s, want queued again", failedLeg, j.Status)
	}
	if j := by["deploy"]; j.Status != execution.StatusPending {
		t.Errorf("deploy = %s, want pending (it needs the rerun leg)", j.Status)
	}
}
