package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

const quickWorkflow = `name: ci
on: {push: {branches: [main]}}
jobs:
  build:
    steps:
      - name: compile
        run: echo compiled
`

// The fake answers 500 (with Retry-After) then 200: the call is retried,
// the run is unaffected, and the check ends completed/success, created
// once.
func TestForgeStatusRetriesAfter500(t *testing.T) {
	g := newGHForge(t, quickWorkflow)
	g.fake.Fail(ghfake.Failure{Count: 2, Status: 500, Header: http.Header{"Retry-After": {"1"}}})
	runID := g.push(t, "retry-1")
	if r := g.o.waitRunStatus(t, runID, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run %s", r.Status)
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"ci / build": "completed/success"})
	assertStates(t, "ci / build", checks["ci / build"].States, "completed/success")
	if n := len(g.fake.CheckRuns(ingressRepo)); n != 1 {
		t.Errorf("%d check runs, want 1", n)
	}
	reqs := g.fake.Requests("/repos/acme/api/check-runs")
	if len(reqs) < 3 || reqs[0].Method != "POST" || reqs[1].Method != "POST" {
		t.Fatalf("requests %v: want two refused creates, then the create again", reqs)
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After: 1", gap)
	}
	list := g.o.admin(t, "check-run", "list", "--sha", g.sha, "--json")
	if !strings.Contains(list, `"delivery": "delivered"`) {
		t.Errorf("check-run list --json:\n%s", list)
	}
}

// The forge is down for the whole run: the run ends normally and on time,
// the list shows the delivery retrying with the last error, and once the
// forge is back the final state is delivered on one check.
func TestForgeStatusForgeDownForTheWholeRun(t *testing.T) {
	g := newGHForge(t, quickWorkflow)
	g.fake.SetDown(true)
	runID := g.push(t, "down-1")
	start := time.Now()
	if r := g.o.waitRunStatus(t, runID, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run %s while the forge is down", r.Status)
	}
	t.Logf("run ended %s after the push with the forge down", time.Since(start).Round(time.Millisecond))
	wait.For(t, 30*time.Second, "a failed delivery recorded", func() bool {
		return strings.Contains(g.o.admin(t, "check-run", "list", "--sha", g.sha), "retrying")
	})
	if n := len(g.fake.CheckRuns(ingressRepo)); n != 0 {
		t.Fatalf("%d check runs while down", n)
	}
	var failed struct {
		Entries []struct {
			Event        string   `json:"event"`
			RunIDs       []string `json:"runIds"`
			ErrorMessage string   `json:"errorMessage"`
		} `json:"deliveries"`
	}
	g.o.get(t, "/api/v1/admin/event-log?status=failed&event=check_run.delivery", &failed)
	if len(failed.Entries) == 0 || failed.Entries[0].RunIDs[0] != runID || !strings.Contains(failed.Entries[0].ErrorMessage, "will retry") {
		t.Errorf("event log of the failed delivery: %+v", failed.Entries)
	}
	g.fake.SetDown(false)
	checks := g.waitChecks(t, 6*time.Minute, map[string]string{"ci / build": "completed/success"})
	if s := checks["ci / build"].States; len(s) != 1 {
		t.Errorf("states %v: after the outage the final state alone should be sent", s)
	}
	if n := len(g.fake.CheckRuns(ingressRepo)); n != 1 {
		t.Errorf("%d check runs, want 1", n)
	}
}

// kill -9 of the orchestrator between in_progress and completed: after the
// restart the check is completed on the same check run, one per job.
func TestForgeStatusKill9BetweenInProgressAndCompleted(t *testing.T) {
	marks := marksDir(t)
	wf := `name: ci
on: {push: {branches: [main]}}
jobs:
  gated:
    steps:
      - run: |
          while [ ! -f ` + marks + `/gate ]; do sleep 0.1; done
          echo released
          echo released >> ` + marks + `/released
  other:
    steps:
      - run: echo other
`
	g := newGHForgeAt(t, wf)
	runID := g.push(t, "kill-1")
	g.waitChecks(t, 60*time.Second, map[string]string{"ci / gated": "in_progress", "ci / other": "completed/success"})
	g.o.kill9(t)
	write(t, filepath.Join(marks, "gate"), "")
	// The job ends while no orchestrator listens.
	waitFileContains(t, 30*time.Second, "the gated step to end", filepath.Join(marks, "released"), "released")
	o2 := startOrchestratorAt(t, g.o.dataDir, g.port, "KICI_PUBLIC_URL="+forgePublicURL, loopbackSourcesEnv)
	if r := o2.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run after restart %s", r.Status)
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"ci / gated": "completed/success", "ci / other": "completed/success"})
	assertStates(t, "ci / gated", checks["ci / gated"].States, "completed/success")
	if n := len(g.fake.CheckRuns(ingressRepo)); n != 2 {
		t.Errorf("%d check runs after the restart, want exactly one per job (2)", n)
	}
	creates := 0
	for _, r := range g.fake.Requests("/repos/acme/api/check-runs") {
		if r.Method == "POST" {
			creates++
		}
	}
	if creates != 2 {
		t.Errorf("%d creates, want 2", creates)
	}
}

// A step printing continuously for 30 s: its check shows the live output,
// updated at most once per 5 s (at most 7 update calls), and ends with
// the final state.
func TestForgeStatusCoalescesUpdatesOfAPrintingStep(t *testing.T) {
	g := newGHForge(t, `name: ci
on: {push: {branches: [main]}}
jobs:
  chatty:
    steps:
      - name: print
        run: |
          end=$(( $(date +%s) + 30 ))
          i=0
          while [ $(date +%s) -lt $end ]; do i=$((i+1)); echo "line $i"; sleep 0.05; done
`)
	runID := g.push(t, "chatty-1")
	if r := g.o.waitRunStatus(t, runID, 120*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run %s", r.Status)
	}
	checks := g.waitChecks(t, 30*time.Second, map[string]string{"ci / chatty": "completed/success"})
	var patches []ghfake.Request
	for _, r := range g.fake.Requests("/repos/acme/api/check-runs/") {
		if r.Method == "PATCH" {
			patches = append(patches, r)
		}
	}
	var times []string
	for i, p := range patches {
		times = append(times, p.At.Format("15:04:05.000"))
		if i > 0 && p.At.Sub(patches[i-1].At) < 4900*time.Millisecond {
			t.Errorf("updates %d and %d only %s apart", i-1, i, p.At.Sub(patches[i-1].At))
		}
	}
	t.Logf("%d update calls at %v; states %v", len(patches), times, checks["ci / chatty"].States)
	if len(patches) > 7 {
		t.Errorf("%d update calls for 30 s of output, want at most 7", len(patches))
	}
	// The live output did reach the check while the step ran.
	live := 0
	for _, p := range patches {
		out, _ := p.Body["output"].(map[string]any)
		if txt, _ := out["text"].(string); strings.Contains(txt, "(running)") && strings.Contains(txt, "line ") {
			live++
		}
	}
	if live < 3 {
		t.Errorf("%d updates carried the running step's output, want several", live)
	}
}

// newGHForgeAt is newGHForge on a fixed port and data dir, for restarts.
func newGHForgeAt(t *testing.T, workflow string) *ghForgeAt {
	t.Helper()
	g := &ghForgeAt{ghForge: &ghForge{repo: repoWithWorkflow(t, workflow)}}
	g.sha = git(t, g.repo, "rev-parse", "HEAD")
	g.serveLock(t)
	g.port = freePort(t)
	g.o = startOrchestratorAt(t, t.TempDir(), g.port, "KICI_PUBLIC_URL="+forgePublicURL, loopbackSourcesEnv)
	g.addSource(t)
	return g
}

type ghForgeAt struct {
	*ghForge
	port int
}
