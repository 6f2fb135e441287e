package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// A failing job, its skipped dependent and a timed-out step, in one run:
// each check ends with its conclusion, the failing one carrying the failing
// step's last lines (and not the earlier ones), the timed-out one timed_out.
func TestForgeStatusFailureSkipAndTimeout(t *testing.T) {
	g := newGHForge(t, `name: ci
on: {push: {branches: [main]}}
jobs:
  build:
    contexts: [release]
    steps:
      - name: compile
        secrets:
          NPM_TOKEN: release:npm_token
        run: |
          for i in $(seq 1 80); do echo "build line $i"; done
          echo "publishing with $NPM_TOKEN"
          printf '\033[1;31merror:\033[0m the widget is broken \033]0;title\007\n'
          exit 3
  deploy:
    needs: [build]
    steps:
      - run: echo deploying
  slow:
    steps:
      - name: hang
        timeout: 1s
        run: sleep 30
`)
	g.o.admin(t, "context", "create", "--org", "acme", "--name", "release")
	g.o.admin(t, "context", "bind", "--org", "acme", "--env", "release", "--scope", "release")
	g.o.adminIn(t, secretToken+"\n", "secret", "set", "--org", "acme", "release", "npm_token", "--from-stdin")
	runID := g.push(t, "fail-1")
	r := g.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	if r.Status != "failed" {
		t.Fatalf("run %s", r.Status)
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{
		"ci / build": "completed/failure", "ci / deploy": "completed/skipped", "ci / slow": "completed/timed_out"})
	for name, c := range checks {
		assertStates(t, name, c.States, c.States[len(c.States)-1])
	}
	out, _ := checks["ci / build"].Fields["output"].(map[string]any)
	text, _ := out["text"].(string)
	title, _ := out["title"].(string)
	if !strings.Contains(text, "error: the widget is broken") || !strings.Contains(text, "build line 80") || strings.Contains(text, "build line 10\n") {
		t.Errorf("failing check text should hold the last lines only:\n%s", text)
	}
	if strings.Contains(text, "\x1b") || strings.Contains(text, "[0m") || strings.Contains(text, "title") {
		t.Errorf("check text carries terminal escapes or their remains:\n%q", text)
	}
	if strings.Contains(text, secretToken) || !strings.Contains(text, "publishing with ***") {
		t.Errorf("the failing lines must be masked as the stored log is:\n%s", text)
	}
	for _, r := range g.fake.Requests("/repos/") {
		if b, _ := json.Marshal(r.Body); strings.Contains(string(b), secretToken) {
			t.Errorf("%s %s carries the secret", r.Method, r.Path)
		}
	}
	if !strings.Contains(title, `step "compile"`) {
		t.Errorf("failing check title %q does not name the step", title)
	}
	if out, _ := checks["ci / deploy"].Fields["output"].(map[string]any); !strings.Contains(out["title"].(string), "build") {
		t.Errorf("skipped check title %q does not say which upstream", out["title"])
	}
	if len(g.fake.CheckRuns(ingressRepo)) != 3 {
		t.Errorf("%d check runs, want 3", len(g.fake.CheckRuns(ingressRepo)))
	}
}

// A cancelled run: the running job's check ends cancelled, the job that
// never started too.
func TestForgeStatusCancelledRun(t *testing.T) {
	marks := marksDir(t)
	g := newGHForge(t, `name: ci
on: {push: {branches: [main]}}
jobs:
  long:
    steps:
      - run: |
          echo started > `+marks+`/started
          sleep 60
  after:
    needs: [long]
    steps:
      - run: echo after
`)
	runID := g.push(t, "cancel-1")
	waitFileContains(t, 60*time.Second, "job start", filepath.Join(marks, "started"), "started")
	g.waitChecks(t, 30*time.Second, map[string]string{"ci / long": "in_progress"})
	g.o.admin(t, "runs", "cancel", runID)
	r := g.o.waitRunStatus(t, runID, 60*time.Second, "success", "failed", "cancelled")
	if r.Status != "cancelled" {
		t.Fatalf("run %s", r.Status)
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"ci / long": "completed/cancelled"})
	assertStates(t, "ci / long", checks["ci / long"].States, "completed/cancelled")
	if s := checks["ci / long"].States; !slices.Contains(s, "in_progress") {
		t.Errorf("long: states %v, want in_progress before cancelled", s)
	}
	// The job that never started is reported by its own delivery, which
	// may come after the running job's: wait for it to end.
	var after []string
	wait.Until(30*time.Second, func() bool {
		for _, c := range g.fake.CheckRuns(ingressRepo) {
			if c.Fields["name"] == "ci / after" {
				after = c.States
			}
		}
		return after == nil || strings.HasPrefix(after[len(after)-1], "completed/")
	})
	if after != nil {
		if last := after[len(after)-1]; last != "completed/cancelled" && last != "completed/skipped" {
			t.Errorf("after: %v", after)
		}
	}
}
