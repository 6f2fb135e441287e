package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/fixtures"
	"kici.dev/kici/internal/testutil/ghfake"
)

// statusWorkflow runs on any commit status and prints the release
// context's secret; lockName says which lock the run was built from.
func statusWorkflow(lockName string) string {
	return `name: on-status
on:
  status: {}
jobs:
  leak:
    contexts: [release]
    steps:
      - name: print
        secrets:
          NPM_TOKEN: release:npm_token
        run: echo "lock=` + lockName + ` token=$NPM_TOKEN"
`
}

// The attack of a signed GitHub status delivery for a commit that is on no
// branch of the repository (a fork's head) whose lock was planted to run
// on `status` and print a context secret: kici never reads that lock, the
// run it builds from the default branch's lock is untrusted (held under
// the default fork policy), and once approved it gets no secret. A status
// kici posts itself starts nothing.
func TestStatusEventPlantedLockNoTrustedRunNoSecrets(t *testing.T) {
	repo := repoWithWorkflow(t, statusWorkflow("default"))
	mainSHA := git(t, repo, "rev-parse", "HEAD")
	mainLock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	plantedSHA, plantedLock := branchWithWorkflow(t, repo, "planted", statusWorkflow("planted"), nil)

	fake := ghfake.New(ingressApp)
	defer fake.Close()
	for _, ref := range []string{"main", mainSHA} {
		fake.SetFile(ingressRepo, ref, ".kici/kici.lock.json", mainLock)
	}
	fake.SetFile(ingressRepo, plantedSHA, ".kici/kici.lock.json", plantedLock)
	fake.SetBranch(ingressRepo, "main", mainSHA)

	o := startOrchestrator(t, loopbackSourcesEnv)
	srcID := o.addGitHubAppSource(t, fake)
	o.releaseContext(t)

	status := func(sha, context string) []byte {
		b, err := fixtures.GitHubStatus(fixtures.StatusEvent{Repo: ingressRepo, DefaultBranch: "main", CloneURL: "file://" + repo,
			Installation: 9, SHA: sha, Context: context})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	url := o.url + "/webhook/acme/github/" + srcID

	// kici's own status on the planted commit: processed, no run.
	postGitHubEvent(t, url, "status", "status-own", status(plantedSHA, "kici/on-status/leak"))
	// The attack: a third-party status on the planted commit.
	postGitHubEvent(t, url, "status", "status-1", status(plantedSHA, "ci/external"))
	runID := o.runOf(t, fmt.Sprintf("github:%d:status-1", ingressApp))
	var list struct {
		Runs []runView `json:"runs"`
	}
	o.get(t, fmt.Sprintf("/api/v1/admin/runs?deliveryId=github:%d:status-own", ingressApp), &list)
	if len(list.Runs) != 0 {
		t.Fatalf("kici's own status started %d runs", len(list.Runs))
	}
	o.waitHeldUntrusted(t, runID)

	o.admin(t, "held-run", "approve", runID)
	o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["leak"]
	out := o.logText(t, runID, job.JobID, 0)
	if strings.Contains(out, secretToken) || strings.Contains(out, "lock=planted") {
		t.Fatalf("the status run leaked or used the planted lock:\n%s", out)
	}
	if !strings.Contains(out, "secrets not available") {
		t.Fatalf("the secret step did not say the secret is unavailable:\n%s", out)
	}
}
