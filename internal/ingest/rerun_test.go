package ingest

import (
	"errors"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// TestRerunCreatesLinkedRunAtSameCommit: a rerun of a finished run is a new
// run of the same workflow at the same SHA, linked to its parent (and to
// the chain's root); unfinished and unknown runs are refused.
func TestRerunCreatesLinkedRunAtSameCommit(t *testing.T) {
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	id := h.deliver("refs/heads/main", "", c1)
	h.process(id)
	orig := h.runsOf(id)["ci"]
	if _, err := h.proc.Rerun(h.ctx, orig.ID, "alice"); !errors.Is(err, ErrRunNotFinished) {
		t.Fatalf("rerun of a pending run: %v, want ErrRunNotFinished", err)
	}
	if _, err := h.proc.Rerun(h.ctx, "nope", "alice"); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("rerun of an unknown run: %v", err)
	}
	if _, err := h.st.UpdateRunStatus(h.ctx, orig.ID, nil, status.RunFailed, store.RunUpdate{}); err != nil {
		t.Fatal(err)
	}
	// A newer commit must not change what the rerun builds.
	h.repo.Write("x.txt", "x")
	h.repo.Commit("later")

	re, err := h.proc.Rerun(h.ctx, orig.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if re.ID == orig.ID || re.SHA != c1 || re.WorkflowName != "ci" || re.TriggeredBy != "alice" || re.DeliveryID != "" || re.SourceID != orig.SourceID {
		t.Errorf("rerun = %+v", re)
	}
	if orig.TriggerType != apitypes.TriggerPush || re.TriggerType != apitypes.TriggerRerun {
		t.Errorf("trigger types: original %q, rerun %q; want push and rerun", orig.TriggerType, re.TriggerType)
	}
	jobs, err := h.st.ListJobs(h.ctx, re.ID)
	if err != nil || len(jobs) != 4 {
		t.Fatalf("rerun jobs = %d, %v; want the 4 jobs of ci", len(jobs), err)
	}
	l, err := h.st.GetRunLink(h.ctx, re.ID)
	if err != nil || l.ParentRunID != orig.ID || l.OriginalRunID != orig.ID {
		t.Fatalf("link = %+v, %v", l, err)
	}
	// A rerun of the rerun keeps the chain's root.
	if _, err := h.st.UpdateRunStatus(h.ctx, re.ID, nil, status.RunSuccess, store.RunUpdate{}); err != nil {
		t.Fatal(err)
	}
	re2, err := h.proc.Rerun(h.ctx, re.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if l2, _ := h.st.GetRunLink(h.ctx, re2.ID); l2 == nil || l2.ParentRunID != re.ID || l2.OriginalRunID != orig.ID {
		t.Errorf("second link = %+v", l2)
	}
	// A paused source starts nothing, reruns included.
	if err := h.st.SetSourceEnabled(h.ctx, orig.SourceID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proc.Rerun(h.ctx, orig.ID, "carol"); !errors.Is(err, ErrRerunUnavailable) || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("rerun while the source is paused: %v", err)
	}
}
