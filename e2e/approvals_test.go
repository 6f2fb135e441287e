package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

// deployWorkflow binds job deploy to context release. It prints the
// context variable, uses the declared secret (masked), shows that an
// undeclared step and a secret outside the context's bindings stay out.
const deployWorkflow = `name: deploy
on:
  push:
    branches: [main]
jobs:
  deploy:
    contexts: [release]
    steps:
      - name: show
        run: |
          echo "region=$REGION tier=$TIER"
      - name: publish
        secrets:
          NPM_TOKEN: release:npm_token
        run: |
          echo "token=$NPM_TOKEN"
          test -n "$NPM_TOKEN" && echo has-token
      - name: bystander
        run: echo "bystander=${NPM_TOKEN:-unset}"
`

// adminFails runs kici-admin expecting a non-zero exit and returns its
// combined output.
func (o *orchestrator) adminFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), args...)
	cmd.Env = append(os.Environ(), o.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("kici-admin %v succeeded, want a failure:\n%s", args, out.String())
	}
	return out.String()
}

type heldRunRow struct {
	ID       string `json:"id"`
	RunID    string `json:"runId"`
	JobID    string `json:"jobId"`
	HoldType string `json:"holdType"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
}

func (o *orchestrator) heldRuns(t *testing.T, runID string) []heldRunRow {
	t.Helper()
	var resp struct {
		HeldRuns []heldRunRow `json:"heldRuns"`
	}
	o.get(t, "/api/v1/admin/held-runs?customerId=acme&runId="+runID, &resp)
	return resp.HeldRuns
}

// A job bound to a context with required reviewers is held until approved
// through the CLI, then runs with the context's variables and only its
// declared secret; the context cannot be deleted while the hold is
// pending; a rejection cancels the next run.
func TestContextReviewersHoldApproveRejectAndDelete(t *testing.T) {
	testContextReviewers(t)
}

func TestContextReviewersHoldApproveRejectAndDeletePostgres(t *testing.T) {
	testContextReviewers(t, "KICI_DATABASE_URL="+pgtest.URL(t))
}

func testContextReviewers(t *testing.T, extraEnv ...string) {
	o := startOrchestrator(t, extraEnv...)
	o.admin(t, "context", "create", "--org", "acme", "--name", "release", "--required-reviewers", "alice")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	o.admin(t, "variable", "set", "acme", "release", "REGION", "eu-west")
	o.admin(t, "variable", "set", "acme", "release", "TIER", "gold", "--locked")
	o.adminIn(t, secretToken+"\n", "secret", "set", "--org", "acme", "release", "npm_token", "--from-stdin")

	repo := repoWithWorkflow(t, deployWorkflow)
	sourceID, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)

	run := o.waitRunStatus(t, runID, 30*time.Second, "held")
	if run.Status != "held" {
		t.Fatalf("run %s", run.Status)
	}
	job := o.jobsOf(t, runID)["deploy"]
	if job.Status != "held" || !strings.Contains(job.RoutingReason, "requires approval from alice") {
		t.Fatalf("job %s %q, want held with its reason", job.Status, job.RoutingReason)
	}
	holds := o.heldRuns(t, runID)
	if len(holds) != 1 || holds[0].HoldType != "reviewer" {
		t.Fatalf("held runs %+v", holds)
	}
	if out := o.admin(t, "held-run", "list", "--org", "acme"); !strings.Contains(out, holds[0].ID) {
		t.Fatalf("held-run list does not show the hold:\n%s", out)
	}

	// The context cannot go while a run waits on it.
	if out := o.adminFails(t, "context", "delete", "--org", "acme", "--name", "release"); !strings.Contains(out, "pending_held_runs") && !strings.Contains(out, "pending held run") {
		t.Fatalf("context delete while held:\n%s", out)
	}
	status := o.deleteStatus(t, "/api/v1/admin/contexts/release?orgId=acme")
	if status != 409 {
		t.Fatalf("DELETE context while held: %d, want 409", status)
	}

	o.admin(t, "held-run", "approve", runID, "--reason", "looks good")
	run = o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	if run.Status != "success" {
		t.Fatalf("run after approval: %s (%s)", run.Status, run.FailureReason)
	}
	job = o.jobsOf(t, runID)["deploy"]
	if show := o.logText(t, runID, job.JobID, 0); !strings.Contains(show, "region=eu-west tier=gold") {
		t.Fatalf("context variables not in the job env:\n%s", show)
	}
	publish := o.logText(t, runID, job.JobID, 1)
	if !strings.Contains(publish, "token=***") || !strings.Contains(publish, "has-token") || strings.Contains(publish, secretToken) {
		t.Fatalf("declared secret not delivered masked:\n%s", publish)
	}
	if by := o.logText(t, runID, job.JobID, 2); !strings.Contains(by, "bystander=unset") {
		t.Fatalf("a step without the declaration saw the secret:\n%s", by)
	}
	if out := o.admin(t, "access-log", "list", "--action", "held_run.approve"); !strings.Contains(out, runID) {
		t.Fatalf("approval not in the access log:\n%s", out)
	}

	// Rejection: a second push is held, then rejected → cancelled.
	write(t, filepath.Join(repo, "again.txt"), "again\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "again")
	_, delivery = o.push(t, repo, sourceID)
	second := o.runOf(t, delivery)
	o.waitRunStatus(t, second, 30*time.Second, "held")
	o.admin(t, "held-run", "reject", second, "--reason", "not today")
	run = o.waitRunStatus(t, second, 30*time.Second, "success", "failed", "cancelled")
	if run.Status != "cancelled" {
		t.Fatalf("run after rejection: %s", run.Status)
	}
	if j := o.jobsOf(t, second)["deploy"]; j.Status != "cancelled" || !strings.Contains(j.ErrorMessage, "not today") {
		t.Fatalf("rejected job %s %q", j.Status, j.ErrorMessage)
	}

	// Nothing pending any more: the context deletes, with its bindings and
	// variables; a new context of the same name starts empty.
	o.admin(t, "context", "delete", "--org", "acme", "--name", "release")
	o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	var shown struct {
		Variables []any `json:"variables"`
		Bindings  []any `json:"bindings"`
	}
	o.get(t, "/api/v1/admin/contexts/release?orgId=acme", &shown)
	if len(shown.Variables) != 0 || len(shown.Bindings) != 0 {
		t.Fatalf("recreated context still has %d variables and %d bindings", len(shown.Variables), len(shown.Bindings))
	}
}

// deleteStatus sends DELETE path with the owner token and returns the
// status code.
func (o *orchestrator) deleteStatus(t *testing.T, path string) int {
	t.Helper()
	req, _ := http.NewRequest("DELETE", o.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
