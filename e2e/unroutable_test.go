package e2e

import (
	"testing"
	"time"
)

// TestUnroutableJobFailsAfterGrace: a job whose runsOn no agent has and no
// scaler label set serves is flagged unroutable at dispatch and fails with
// that reason after KICI_UNROUTABLE_GRACE_MS, well before the queue
// timeout (1 h here).
func TestUnroutableJobFailsAfterGrace(t *testing.T) {
	repo := repoWithWorkflow(t, `name: gpu
on: {push: {branches: [main]}}
jobs:
  train:
    runsOn: gpu
    steps:
      - run: echo never
`)
	o := startOrchestrator(t, "KICI_UNROUTABLE_GRACE_MS=1000", "KICI_QUEUE_SWEEP_INTERVAL_MS=200")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 20*time.Second, "failed", "success", "cancelled")
	j := o.jobsOf(t, runID)["train"]
	if r.Status != "failed" || j.Status != "failed" ||
		j.ErrorMessage != "unroutable: no agent online; no scaler label set serves runsOn [gpu] (for 1s)" {
		t.Fatalf("run %s, job %s %q; want both failed with the unroutable reason", r.Status, j.Status, j.ErrorMessage)
	}
}
