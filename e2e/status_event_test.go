package e2e

import (
	"encoding/json"
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
	git(t, repo, "checkout", "-q", "-b", "planted")
	write(t, filepath.Join(repo, ".kici/workflows/w.yaml"), statusWorkflow("planted"))
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "planted lock")
	plantedSHA := git(t, repo, "rev-parse", "HEAD")
	plantedLock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	git(t, repo, "checkout", "-q", "main")

	fake := ghfake.New(ingressApp)
	defer fake.Close()
	for _, ref := range []string{"main", mainSHA} {
		fake.SetFile(ingressRepo, ref, ".kici/kici.lock.json", mainLock)
	}
	fake.SetFile(ingressRepo, plantedSHA, ".kici/kici.lock.json", plantedLock)
	fake.SetBranch(ingressRepo, "main", mainSHA)

	o := startOrchestrator(t, loopbackSourcesEnv)
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, []byte(fake.PrivateKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	srcID := o.admin(t, "-q", "source", "add", "github", "--org", "acme", "--name", "gh", "--app-id", fmt.Sprint(ingressApp),
		"--private-key", "@"+keyFile, "--api-url", fake.URL, "--webhook-secret", ingressSecret)
	o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	o.adminIn(t, secretToken+"\n", "secret", "set", "--org", "acme", "release", "npm_token", "--from-stdin")

	status := func(sha, context string) []byte {
		raw, err := os.ReadFile(filepath.Join(fixtures.GitHubWebhooksDir(), "status.none.1.json"))
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		p["sha"], p["context"], p["branches"] = sha, context, []any{}
		p["installation"] = map[string]any{"id": 9}
		p["repository"] = map[string]any{"full_name": ingressRepo, "default_branch": "main", "clone_url": "file://" + repo}
		b, _ := json.Marshal(p)
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
	o.waitRunStatus(t, runID, 30*time.Second, "held")
	var got struct {
		Run struct {
			TrustTier      string `json:"trustTier"`
			LockFileSource string `json:"lockFileSource"`
		} `json:"run"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID, &got)
	if got.Run.TrustTier != "unknown" || got.Run.LockFileSource != "base" {
		t.Fatalf("run trust %+v: want unknown tier, base lock", got.Run)
	}

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
