package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

// baseForkWorkflow is the base branch's workflow: it names context release
// (which binds the secret's scope) and declares the secret.
const baseForkWorkflow = `name: pr
on:
  pull_request:
    events: [opened]
jobs:
  check:
    contexts: [release]
    steps:
      - name: which-lock
        run: echo "lock=base code=$(cat code.txt)"
      - name: wants-secret
        secrets:
          NPM_TOKEN: release:npm_token
        run: echo "token=$NPM_TOKEN"
`

// forkWorkflow is what the fork's author wrote in their own lock: it would
// print the secret if it were ever used.
const forkWorkflow = `name: pr
on:
  pull_request:
    events: [opened]
jobs:
  check:
    contexts: [release]
    steps:
      - name: which-lock
        run: echo "lock=fork"
`

func postGitHubEvent(t *testing.T, url, event, delivery string, body []byte) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(ingressSecret))
	mac.Write(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("POST %s %s: %d", event, delivery, resp.StatusCode)
	}
}

// addGitHubAppSource adds the GitHub App source "gh" of org acme whose
// REST API is fake (its webhook secret ingressSecret) and returns its id.
func (o *orchestrator) addGitHubAppSource(t *testing.T, fake *ghfake.Server) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, []byte(fake.PrivateKeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	return o.admin(t, "-q", "source", "add", "github", "--org", "acme", "--name", "gh", "--app-id", fmt.Sprint(ingressApp),
		"--private-key", "@"+keyFile, "--api-url", fake.URL, "--webhook-secret", ingressSecret)
}

// releaseContext creates context release of org acme, binds scope release
// to it and stores secretToken as release:npm_token.
func (o *orchestrator) releaseContext(t *testing.T) {
	t.Helper()
	o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	o.adminIn(t, secretToken+"\n", "secret", "set", "--org", "acme", "release", "npm_token", "--from-stdin")
}

// waitHeldUntrusted waits for run runID to be held and checks that it is
// untrusted (tier unknown) and built from the base branch's lock.
func (o *orchestrator) waitHeldUntrusted(t *testing.T, runID string) {
	t.Helper()
	o.waitRunStatus(t, runID, 30*time.Second, "held")
	var got struct {
		Run struct {
			TrustTier      string `json:"trustTier"`
			LockFileSource string `json:"lockFileSource"`
		} `json:"run"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID, &got)
	if got.Run.TrustTier != "unknown" || got.Run.LockFileSource != "base" {
		t.Fatalf("run trust %+v: want tier unknown and the base branch's lock", got.Run)
	}
}

// branchWithWorkflow commits workflow (compiled) and the files of extra on
// a new branch of repo, returns to main and returns the commit and its
// lock file: a commit whose lock is someone else's to write.
func branchWithWorkflow(t *testing.T, repo, branch, workflow string, extra map[string]string) (sha string, lock []byte) {
	t.Helper()
	git(t, repo, "checkout", "-q", "-b", branch)
	write(t, filepath.Join(repo, ".kici/workflows/w.yaml"), workflow)
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	for name, content := range extra {
		write(t, filepath.Join(repo, name), content)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", branch)
	sha = git(t, repo, "rev-parse", "HEAD")
	lock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	git(t, repo, "checkout", "-q", "main")
	return sha, lock
}

// A pull request from a fork under the default trust policy is held as a
// whole, runs the base branch's lock once approved, and gets no secrets:
// the step that declares one fails saying the secret is not available.
func TestForkPullRequestHeldBaseLockNoSecrets(t *testing.T) {
	// One repository holds both sides: main is the base, branch "fork"
	// stands for the fork's head commit (the agent checks out its SHA).
	repo := repoWithWorkflow(t, baseForkWorkflow)
	write(t, filepath.Join(repo, "code.txt"), "base\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "base code")
	baseSHA := git(t, repo, "rev-parse", "HEAD")
	baseLock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	headSHA, forkLock := branchWithWorkflow(t, repo, "fork", forkWorkflow, map[string]string{"code.txt": "fork\n"})

	fake := ghfake.New(ingressApp)
	defer fake.Close()
	for _, ref := range []string{"main", baseSHA} {
		fake.SetFile(ingressRepo, ref, ".kici/kici.lock.json", baseLock)
	}
	fake.SetFile(ingressRepo, headSHA, ".kici/kici.lock.json", forkLock)
	fake.SetBranch(ingressRepo, "main", baseSHA)
	fake.SetPermission(ingressRepo, "outsider", "read")

	o := startOrchestrator(t, loopbackSourcesEnv)
	srcID := o.addGitHubAppSource(t, fake)
	o.releaseContext(t)
	if out := o.admin(t, "trust-policy", "show", "--org", "acme"); !strings.Contains(out, "hold") {
		t.Fatalf("default trust policy is not hold:\n%s", out)
	}

	pr, _ := json.Marshal(map[string]any{"action": "opened", "number": 7, "installation": map[string]any{"id": 9},
		"pull_request": map[string]any{"number": 7, "user": map[string]any{"login": "outsider"},
			"head": map[string]any{"ref": "fork", "sha": headSHA, "repo": map[string]any{"full_name": "outsider/api"}},
			"base": map[string]any{"ref": "main", "sha": baseSHA, "repo": map[string]any{"full_name": ingressRepo}}},
		"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main", "clone_url": "file://" + repo},
		"sender":     map[string]any{"login": "outsider", "id": 31337}})
	postGitHubEvent(t, o.url+"/webhook/acme/github/"+srcID, "pull_request", "fork-pr-1", pr)
	runID := o.runOf(t, fmt.Sprintf("github:%d:fork-pr-1", ingressApp))
	o.waitHeldUntrusted(t, runID)
	if j := o.jobsOf(t, runID)["check"]; j.Status != "held" || !strings.Contains(j.RoutingReason, "fork pull request") {
		t.Fatalf("job %s %q", j.Status, j.RoutingReason)
	}
	// Nothing ran while held.
	wait.Elapse(t.Context(), 1500*time.Millisecond) // room for a start that must not come
	if j := o.jobsOf(t, runID)["check"]; j.Status != "held" || len(j.Steps) != 0 {
		t.Fatalf("held job moved: %s, %d steps", j.Status, len(j.Steps))
	}

	o.admin(t, "held-run", "approve", runID)
	r := o.waitRunStatus(t, runID, 3*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["check"]
	if lockOut := o.logText(t, runID, job.JobID, 0); !strings.Contains(lockOut, "lock=base code=fork") {
		t.Fatalf("the run did not use the base lock on the fork's code:\n%s", lockOut)
	}
	if r.Status != "failed" || len(job.Steps) < 2 || job.Steps[1].Status != "failed" {
		t.Fatalf("run %s, steps %+v: want the secret step to fail", r.Status, job.Steps)
	}
	secretOut := o.logText(t, runID, job.JobID, 1)
	if !strings.Contains(secretOut, "secrets not available") || strings.Contains(secretOut, secretToken) {
		t.Fatalf("secret step log:\n%s", secretOut)
	}
}
