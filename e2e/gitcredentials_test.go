package e2e

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestContainerBuildJobPushesWithGitCredentials: a job naming
// `gitCredentials` pushes a branch to an HTTP git server that demands
// basic auth (git http-backend behind a loopback server), through the
// credential helper the agent writes; the token is not in the steps'
// environment and is masked when a step prints it.
func TestContainerBuildJobPushesWithGitCredentials(t *testing.T) {
	const user, token = "ci-bot", "push-token-5b1f9c27e0"
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	target := filepath.Join(root, "target.git")
	git(t, root, "init", "-q", "--bare", target)
	git(t, target, "config", "http.receivepack", "true")
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()

	repo := repoWithWorkflow(t, `name: release
on: {push: {branches: [main]}}
jobs:
  tag:
    contexts: [push]
    gitCredentials: ci:push
    steps:
      - name: push
        run: |
          env | grep -c `+token+` || echo "no credential in the environment"
          git -c user.name=ci -c user.email=ci@example.test commit -q --allow-empty -m "from ci"
          git push `+srv.URL+`/target.git HEAD:refs/heads/from-ci
          echo "the token is `+token+`"
`)
	o := startOrchestrator(t, loopbackSourcesEnv)
	o.admin(t, "context", "create", "--org", "acme", "--name", "push")
	o.admin(t, "context", "bind", "--org", "acme", "--env", "push", "--scope", "ci")
	o.adminIn(t, user+":"+token+"\n", "secret", "set", "--org", "acme", "ci", "push", "--from-stdin")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	r := o.waitRunStatus(t, runID, 2*time.Minute, "success", "failed", "cancelled")
	job := o.jobsOf(t, runID)["tag"]
	log := o.logText(t, runID, job.JobID, 0)
	if r.Status != "success" {
		t.Fatalf("run %s (%s); step log:\n%s\nsetup log:\n%s", r.Status, job.ErrorMessage, log, o.logText(t, runID, job.JobID, -1))
	}
	if got := strings.TrimSpace(git(t, target, "log", "-1", "--format=%s", "from-ci")); got != "from ci" {
		t.Errorf("pushed branch head %q, want the job's commit", got)
	}
	if !strings.Contains(log, "no credential in the environment") || strings.Contains(log, token) || !strings.Contains(log, "the token is ***") {
		t.Errorf("step log shows the credential or its environment:\n%s", log)
	}
	if setup := o.logText(t, runID, job.JobID, -1); !strings.Contains(setup, "credential helper") || strings.Contains(setup, token) {
		t.Errorf("setup log:\n%s", setup)
	}
}
