package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

// The forge reporter against a recording fake of the GitHub API: what a
// user sees on the commit and the pull request.

const forgePublicURL = "https://ci.example.com"

// ghForge is one orchestrator with a GitHub App source whose repository
// (acme/api) is a local git repository holding workflow.
type ghForge struct {
	o     *orchestrator
	fake  *ghfake.Server
	repo  string
	sha   string
	srcID string
}

// newGHForge compiles workflow into a fresh repository, serves its lock
// from the fake at HEAD and starts an orchestrator with a GitHub App
// source pointed at the fake.
func newGHForge(t *testing.T, workflow string, extraEnv ...string) *ghForge {
	t.Helper()
	g := &ghForge{repo: repoWithWorkflow(t, workflow)}
	g.sha = git(t, g.repo, "rev-parse", "HEAD")
	g.serveLock(t)
	g.o = startOrchestrator(t, append([]string{"KICI_PUBLIC_URL=" + forgePublicURL, loopbackSourcesEnv}, extraEnv...)...)
	g.addSource(t)
	return g
}

// serveLock starts the fake and serves the repository's lock at HEAD.
func (g *ghForge) serveLock(t *testing.T) {
	lock, err := os.ReadFile(filepath.Join(g.repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	g.fake = ghfake.New(ingressApp)
	t.Cleanup(g.fake.Close)
	g.fake.SetFile(ingressRepo, g.sha, ".kici/kici.lock.json", lock)
	g.fake.SetFile(ingressRepo, "main", ".kici/kici.lock.json", lock)
	g.fake.SetInstallation(ingressRepo, 7)
}

func (g *ghForge) addSource(t *testing.T) { g.srcID = g.o.addGitHubAppSource(t, g.fake) }

// push delivers a push of HEAD to main and returns the run id.
func (g *ghForge) push(t *testing.T, delivery string) string {
	t.Helper()
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,`+
		`"installation":{"id":7},"sender":{"login":"dev","id":1001},`+
		`"repository":{"full_name":%q,"default_branch":"main","clone_url":"file://%s"}}`, g.sha, ingressRepo, g.repo)
	postGitHubEvent(t, g.o.url+"/webhook/acme/github/"+g.srcID, "push", delivery, body)
	return g.o.runOf(t, fmt.Sprintf("github:%d:%s", ingressApp, delivery))
}

// waitChecks waits until every named check run exists and its last state
// is in want[name], and returns the check runs by name.
func (g *ghForge) waitChecks(t *testing.T, timeout time.Duration, want map[string]string) map[string]ghfake.CheckRun {
	t.Helper()
	var got map[string]ghfake.CheckRun
	if !wait.Until(timeout, func() bool {
		got = map[string]ghfake.CheckRun{}
		for _, c := range g.fake.CheckRuns(ingressRepo) {
			got[fmt.Sprint(c.Fields["name"])] = c
		}
		ok := true
		for name, state := range want {
			c, found := got[name]
			ok = ok && found && c.States[len(c.States)-1] == state
		}
		return ok
	}) {
		var have []string
		for n, c := range got {
			have = append(have, fmt.Sprintf("%s: %v", n, c.States))
		}
		t.Fatalf("check runs after %s: %v, want last states %v", timeout, have, want)
	}
	return got
}

// assertStates checks that a check run's states only ever moved forward
// (queued → in_progress → completed) and ended at last, posted once. A
// job that ends within one reporter pass may skip the earlier states.
func assertStates(t *testing.T, name string, states []string, last string) {
	t.Helper()
	rank := func(s string) int {
		switch {
		case s == "queued":
			return 0
		case s == "in_progress":
			return 1
		case strings.HasPrefix(s, "completed/"):
			return 2
		}
		return -1
	}
	for i, s := range states {
		if rank(s) < 0 || (i > 0 && rank(s) < rank(states[i-1])) {
			t.Errorf("%s: states %v move backwards or are unknown", name, states)
		}
	}
	if states[len(states)-1] != last {
		t.Errorf("%s: states %v, want %s last", name, states, last)
	}
	if n := len(states) - slices.Index(states, last); n != 1 {
		t.Errorf("%s: final state posted %d times: %v", name, n, states)
	}
}

// A passing push: one check run per job (a matrix leg by its leg name),
// created queued, completed success, linked to the job's page, with a
// summary of the steps; `kici-admin check-run list` shows it delivered.
func TestForgeStatusPassingPushGitHubChecks(t *testing.T) {
	g := newGHForge(t, `name: ci
on: {push: {branches: [main]}}
jobs:
  build:
    steps:
      - name: compile
        run: echo compiled
  test:
    needs: [build]
    matrix:
      go: ["1.22"]
    steps:
      - name: unit
        run: echo tested
`)
	runID := g.push(t, "pass-1")
	r := g.o.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	if r.Status != "success" {
		t.Fatalf("run %s", r.Status)
	}
	jobs := g.o.jobsOf(t, runID)
	var legName string
	for name := range jobs {
		if strings.HasPrefix(name, "test") {
			legName = name
		}
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"ci / build": "completed/success", "ci / " + legName: "completed/success"})
	if len(g.fake.CheckRuns(ingressRepo)) != 2 {
		t.Fatalf("%d check runs, want one per job (2)", len(g.fake.CheckRuns(ingressRepo)))
	}
	for name, c := range checks {
		assertStates(t, name, c.States, "completed/success")
		job := jobs[strings.TrimPrefix(name, "ci / ")]
		if c.Fields["head_sha"] != g.sha || c.Fields["external_id"] != job.JobID {
			t.Errorf("%s: head_sha %v external_id %v, want %s %s", name, c.Fields["head_sha"], c.Fields["external_id"], g.sha, job.JobID)
		}
		if want := forgePublicURL + "/ui/runs/" + runID + "/jobs/" + job.JobID; c.Fields["details_url"] != want {
			t.Errorf("%s: details_url %v, want %s", name, c.Fields["details_url"], want)
		}
	}
	out, _ := checks["ci / build"].Fields["output"].(map[string]any)
	if s, _ := out["summary"].(string); !strings.Contains(s, "| compile | success |") || !strings.Contains(s, runID) {
		t.Errorf("build summary:\n%s", s)
	}
	// Requests: one create per check, then updates by id, nothing else.
	for _, req := range g.fake.Requests("/repos/") {
		ok := (req.Method == "POST" && req.Path == "/repos/acme/api/check-runs") ||
			(req.Method == "PATCH" && strings.HasPrefix(req.Path, "/repos/acme/api/check-runs/"))
		if !ok {
			t.Errorf("unexpected request %s %s", req.Method, req.Path)
		}
	}
	if n := len(slices.DeleteFunc(g.fake.Requests("/repos/acme/api/check-runs"), func(r ghfake.Request) bool { return r.Method != "POST" })); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
	list := g.o.admin(t, "check-run", "list", "--sha", g.sha)
	if !strings.Contains(list, "ci / build") || !strings.Contains(list, "completed/success") || !strings.Contains(list, "delivered") {
		t.Errorf("check-run list:\n%s", list)
	}
}
