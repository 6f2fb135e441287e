package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

// A fork pull request held for approval is visible on the forge
// (action_required, the reason in words); a `/kici approve` from someone
// outside the approval directory is refused with a reply on the pull
// request; once approved, the job gets a new check run that completes.
func TestForgeStatusHeldForkApprovedAndRefusedComment(t *testing.T) {
	g := newGHForge(t, quickWorkflowPR)
	headSHA := g.sha
	g.fake.SetPermission(ingressRepo, "outsider", "read")
	pr, _ := json.Marshal(map[string]any{"action": "opened", "number": 7, "installation": map[string]any{"id": 7},
		"pull_request": map[string]any{"number": 7, "user": map[string]any{"login": "outsider"},
			"head": map[string]any{"ref": "fork", "sha": headSHA, "repo": map[string]any{"full_name": "outsider/api"}},
			"base": map[string]any{"ref": "main", "sha": headSHA, "repo": map[string]any{"full_name": ingressRepo}}},
		"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main", "clone_url": "file://" + g.repo},
		"sender":     map[string]any{"login": "outsider", "id": 31337}})
	postGitHubEvent(t, g.o.url+"/webhook/acme/github/"+g.srcID, "pull_request", "held-pr-1", pr)
	runID := g.o.runOf(t, fmt.Sprintf("github:%d:held-pr-1", ingressApp))
	g.o.waitRunStatus(t, runID, 30*time.Second, "held")
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"pr / check": "completed/action_required"})
	out, _ := checks["pr / check"].Fields["output"].(map[string]any)
	title, _ := out["title"].(string)
	if !strings.Contains(title, "ork pull request from outsider waits for approval") || !strings.Contains(title, "/kici approve "+runID) ||
		!strings.Contains(title, "kici-admin held-run approve") {
		t.Errorf("held check title %q", title)
	}

	// A comment from someone outside the approval directory: refused, and
	// the pull request says so.
	comment, _ := json.Marshal(map[string]any{"action": "created", "installation": map[string]any{"id": 7},
		"issue":      map[string]any{"number": 7, "pull_request": map[string]any{"url": "x"}},
		"comment":    map[string]any{"body": "/kici approve " + runID},
		"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main"},
		"sender":     map[string]any{"login": "stranger", "id": 4040}})
	postGitHubEvent(t, g.o.url+"/webhook/acme/github/"+g.srcID, "issue_comment", "comment-1", comment)
	var reply ghfake.Request
	wait.For(t, 30*time.Second, "a reply to the comment", func() bool {
		rs := g.fake.Requests("/repos/acme/api/issues/7/comments")
		if len(rs) > 0 {
			reply = rs[0]
		}
		return len(rs) > 0
	})
	if body, _ := reply.Body["body"].(string); !strings.Contains(body, "refused") || !strings.Contains(body, "approval directory") || !strings.Contains(body, "stranger") {
		t.Errorf("reply %q", body)
	}
	if st := g.o.waitRunStatus(t, runID, 5*time.Second, "held"); st.Status != "held" {
		t.Fatalf("the refused comment moved the run: %s", st.Status)
	}

	g.o.admin(t, "held-run", "approve", runID)
	if r := g.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("approved run %s", r.Status)
	}
	wait.For(t, 30*time.Second, "a new check completed after the approval", func() bool {
		cs := g.fake.CheckRuns(ingressRepo)
		return len(cs) == 2 && cs[1].States[len(cs[1].States)-1] == "completed/success"
	})
	cs := g.fake.CheckRuns(ingressRepo)
	if cs[0].States[len(cs[0].States)-1] != "completed/action_required" || cs[1].Fields["name"] != "pr / check" {
		t.Errorf("checks after approval: %v / %v %v", cs[0].States, cs[1].Fields["name"], cs[1].States)
	}
}

// GitHub's "Re-run" button on one check: from a user without write access
// it is refused and recorded in the event log; from a writer it reruns
// that check's job and the job that needs it, in a new run where the other
// job keeps its result, and their checks are posted again and complete.
// "Re-run all checks" (check_suite) reruns every job.
func TestForgeStatusCheckRunRerequested(t *testing.T) {
	g := newGHForge(t, rerunWorkflow)
	g.fake.SetPermission(ingressRepo, "reader", "read")
	g.fake.SetPermission(ingressRepo, "writer", "write")
	runID := g.push(t, "rerun-push-1")
	g.o.waitRunStatus(t, runID, 60*time.Second, "success", "failed", "cancelled")
	all := map[string]string{"ci / build": "completed/success", "ci / lint": "completed/success", "ci / package": "completed/success"}
	lint := g.waitChecks(t, 30*time.Second, all)["ci / lint"]
	rerequest := func(delivery, who string) {
		body, _ := json.Marshal(map[string]any{"action": "rerequested", "installation": map[string]any{"id": 7},
			"check_run":  map[string]any{"id": lint.ID, "name": "ci / lint", "external_id": lint.Fields["external_id"], "head_sha": g.sha},
			"repository": map[string]any{"full_name": ingressRepo, "default_branch": "main"},
			"sender":     map[string]any{"login": who, "id": 77}})
		postGitHubEvent(t, g.o.url+"/webhook/acme/github/"+g.srcID, "check_run", delivery, body)
	}
	rerequest("rerun-1", "reader")
	id := fmt.Sprintf("github:%d:rerun-1", ingressApp)
	wait.For(t, 30*time.Second, "the refused re-run recorded", func() bool {
		return strings.Contains(g.o.admin(t, "event-log", "show", id), "refused")
	})
	if out := g.o.admin(t, "event-log", "show", id); !strings.Contains(out, `"reader" has "read" permission`) {
		t.Errorf("event log of the refused re-run:\n%s", out)
	}
	// The refusal is shown on the commit: a neutral check saying why.
	var refusal ghfake.CheckRun
	wait.For(t, 30*time.Second, "the refusal shown on the commit", func() bool {
		for _, c := range g.fake.CheckRuns(ingressRepo) {
			if c.Fields["name"] == "kici / re-run" {
				refusal = c
				return true
			}
		}
		return false
	})
	out, _ := refusal.Fields["output"].(map[string]any)
	if refusal.Fields["head_sha"] != g.sha || refusal.States[len(refusal.States)-1] != "completed/neutral" ||
		!strings.Contains(fmt.Sprint(out["summary"]), `"reader" has "read" permission`) || !strings.Contains(fmt.Sprint(out["title"]), "refused") {
		t.Errorf("refusal check %v %v", refusal.States, refusal.Fields)
	}
	if n := len(g.fake.CheckRuns(ingressRepo)); n != 4 {
		t.Errorf("%d check runs after the refused re-run, want the original 3 and the refusal", n)
	}

	// A writer's "Re-run" of ci / lint: a new run in which lint and
	// package (which needs lint) run again and build keeps its result.
	rerequest("rerun-2", "writer")
	rerunID := g.o.newRun(t, runID)
	if r := g.o.waitRunStatus(t, rerunID, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("rerun %s", r.Status)
	}
	jobs := g.o.jobsOf(t, rerunID)
	if j := jobs["build"]; j.Status != "success" || j.ErrorMessage != "carried over from run "+runID {
		t.Errorf("build in the rerun = %s %q, want carried over from %s", j.Status, j.ErrorMessage, runID)
	}
	for _, name := range []string{"lint", "package"} {
		j := jobs[name]
		if j.Status != "success" || j.ErrorMessage != "" || len(j.Steps) != 1 || j.Steps[0].Status != "success" {
			t.Errorf("%s in the rerun = %s %q steps %v, want run again", name, j.Status, j.ErrorMessage, j.Steps)
		}
	}
	if got := g.o.logText(t, rerunID, jobs["lint"].JobID, 0); !strings.Contains(got, "linted") {
		t.Errorf("lint log in the rerun %q", got)
	}
	wait.For(t, 30*time.Second, "the rerun's checks completed", func() bool {
		n := 0
		for _, c := range g.fake.CheckRuns(ingressRepo) {
			if c.Fields["external_id"] == jobs["lint"].JobID || c.Fields["external_id"] == jobs["package"].JobID {
				if c.States[len(c.States)-1] == "completed/success" && c.Fields["head_sha"] == g.sha {
					n++
				}
			}
		}
		return n == 2
	})
	var list struct {
		Runs []runView `json:"runs"`
	}
	g.o.get(t, "/api/v1/admin/runs?limit=10", &list)
	if len(list.Runs) != 2 {
		t.Errorf("%d runs, want the original and one rerun", len(list.Runs))
	}
	// "Re-run all checks": check_suite rerequested reruns the commit's run
	// once (the rerun of a listed run is not rerun again), every job.
	suite, _ := json.Marshal(map[string]any{"action": "rerequested", "installation": map[string]any{"id": 7},
		"check_suite": map[string]any{"id": 99, "head_sha": g.sha},
		"repository":  map[string]any{"full_name": ingressRepo, "default_branch": "main"},
		"sender":      map[string]any{"login": "writer", "id": 77}})
	postGitHubEvent(t, g.o.url+"/webhook/acme/github/"+g.srcID, "check_suite", "suite-1", suite)
	suiteID := g.o.newRun(t, runID, rerunID)
	if r := g.o.waitRunStatus(t, suiteID, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("suite rerun %s", r.Status)
	}
	for name, j := range g.o.jobsOf(t, suiteID) {
		if j.Status != "success" || j.ErrorMessage != "" {
			t.Errorf("%s in the suite rerun = %s %q, want run again", name, j.Status, j.ErrorMessage)
		}
	}
	g.o.get(t, "/api/v1/admin/runs?limit=10", &list)
	if len(list.Runs) != 3 {
		t.Errorf("%d runs after the suite re-run, want 3", len(list.Runs))
	}
}

// newRun waits for a run other than known and returns its id.
func (o *orchestrator) newRun(t *testing.T, known ...string) string {
	t.Helper()
	var id string
	wait.For(t, 30*time.Second, "a new run", func() bool {
		var list struct {
			Runs []runView `json:"runs"`
		}
		o.get(t, "/api/v1/admin/runs?limit=20", &list)
		for _, r := range list.Runs {
			if !slices.Contains(known, r.RunID) {
				id = r.RunID
				return true
			}
		}
		return false
	})
	return id
}

// rerunWorkflow has two independent jobs and one that needs lint.
const rerunWorkflow = `name: ci
on: {push: {branches: [main]}}
jobs:
  build:
    steps:
      - run: echo built
  lint:
    steps:
      - run: echo linted
  package:
    needs: [lint]
    steps:
      - run: echo packaged
`

// quickWorkflowPR is a one-job pull request workflow.
const quickWorkflowPR = `name: pr
on:
  pull_request:
    events: [opened]
jobs:
  check:
    steps:
      - run: echo checked
`
