package e2e

// Acceptance tests of "runs that always end right" with the real binaries:
// cancel with cleanup, kill -9 of an agent, kill -9 and restart of the
// orchestrator, queue timeout with a pending reason, and drain. Timeouts
// are shortened with KICI_* variables so each test takes seconds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/wait"
)

// repoWithWorkflow creates a git repository on main holding one workflow
// (.kici/workflows/w.yaml), compiled to the lock, committed.
func repoWithWorkflow(t *testing.T, workflow string) string {
	t.Helper()
	return repoWithWorkflows(t, map[string]string{"w.yaml": workflow})
}

// repoWithWorkflows creates a git repository on main holding the workflow
// files of workflows (file name under .kici/workflows → content) and a
// README, compiled to the lock, committed.
func repoWithWorkflows(t *testing.T, workflows map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "README.txt"), "fixture\n")
	for name, workflow := range workflows {
		write(t, filepath.Join(dir, ".kici/workflows", name), workflow)
	}
	run(t, dir, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "initial")
	return dir
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startOrchestratorAt starts kici-orchestrator on dataDir and a fixed port
// (so it can be restarted at the same address), stopping it at cleanup.
func startOrchestratorAt(t *testing.T, dataDir string, port int, extraEnv ...string) *orchestrator {
	t.Helper()
	return startOrchestratorFrom(t, binDir, dataDir, port, extraEnv...)
}

// startOrchestratorFrom is startOrchestratorAt with the kici-orchestrator
// of bins (and the kici-agent beside it): an older release's binaries in
// the upgrade tests.
func startOrchestratorFrom(t *testing.T, bins, dataDir string, port int, extraEnv ...string) *orchestrator {
	t.Helper()
	o := &orchestrator{dataDir: dataDir}
	o.logPath = filepath.Join(dataDir, fmt.Sprintf("orchestrator-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dataDir, "orchestrator.json"))
	o.env = append([]string{"KICI_DATA_DIR=" + dataDir}, extraEnv...)
	o.cmd = exec.Command(filepath.Join(bins, "kici-orchestrator"))
	base := cleanEnv()
	if bins != binDir {
		// An older release refuses variables it does not know; the
		// shared marks directory is newer than the previous release.
		base = slices.DeleteFunc(base, func(kv string) bool { return strings.HasPrefix(kv, "KICI_STEP_SHARED_PATHS=") })
	}
	o.cmd.Env = append(base, append(o.env, "KICI_PORT="+strconv.Itoa(port))...)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.stop(t)
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(o.logPath)
			t.Logf("orchestrator log %s:\n%s", filepath.Base(o.logPath), b)
		}
	})
	wait.Until(30*time.Second, func() bool {
		var ep struct {
			URL string `json:"url"`
		}
		if b, err := os.ReadFile(filepath.Join(dataDir, "orchestrator.json")); err == nil && json.Unmarshal(b, &ep) == nil {
			o.url = ep.URL
		}
		return o.url != ""
	})
	if o.url == "" {
		t.Fatal("orchestrator did not start")
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	o.token = strings.TrimSpace(string(tok))
	return o
}

// kill9 SIGKILLs the orchestrator process and reaps it.
func (o *orchestrator) kill9(t *testing.T) {
	t.Helper()
	if err := o.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = o.cmd.Wait()
}

// push registers repo as a local source (once per orchestrator data dir)
// and triggers a push of its HEAD; it returns the source and delivery ids.
func (o *orchestrator) push(t *testing.T, repo, sourceID string) (string, string) {
	t.Helper()
	if sourceID == "" {
		sourceID = o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "r"+strconv.FormatInt(time.Now().UnixNano(), 36), "--quiet")
	}
	return sourceID, o.admin(t, "source", "trigger-local", sourceID, "--quiet")
}

// runOf waits for the run of a delivery to exist and returns its id.
func (o *orchestrator) runOf(t *testing.T, delivery string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var list struct {
		Runs []runView `json:"runs"`
	}
	if !wait.Until(time.Until(deadline), func() bool {
		o.get(t, "/api/v1/admin/runs?deliveryId="+delivery, &list)
		if len(list.Runs) > 1 {
			t.Fatalf("delivery %s created %d runs", delivery, len(list.Runs))
		}
		return len(list.Runs) == 1
	}) {
		t.Fatalf("no run for delivery %s", delivery)
	}
	return list.Runs[0].RunID
}

// waitRunStatus polls a run until its status is one of want.
func (o *orchestrator) waitRunStatus(t *testing.T, runID string, timeout time.Duration, want ...string) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var r struct {
		Run runView `json:"run"`
	}
	if !wait.Until(time.Until(deadline), func() bool {
		o.get(t, "/api/v1/admin/runs/"+runID, &r)
		return slices.Contains(want, r.Run.Status)
	}) {
		t.Fatalf("run %s is %q after %s, want one of %v", runID, r.Run.Status, timeout, want)
	}
	return r.Run
}

type jobRow struct {
	JobID         string     `json:"jobId"`
	JobName       string     `json:"jobName"`
	Status        string     `json:"status"`
	ErrorMessage  string     `json:"errorMessage"`
	RoutingReason string     `json:"routingReason"`
	AgentID       string     `json:"agentId"`
	Steps         []stepView `json:"steps"`
	// Outputs are the job's exported outputs.
	Outputs map[string]string `json:"outputs"`
}

func (o *orchestrator) jobsOf(t *testing.T, runID string) map[string]jobRow {
	t.Helper()
	var resp struct {
		Jobs []jobRow `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID+"/jobs?includeSteps=true", &resp)
	out := map[string]jobRow{}
	for _, j := range resp.Jobs {
		out[j.JobName] = j
	}
	return out
}

// pidsIn reads the pids a step wrote to path.
func pidsIn(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %q", path, b)
		}
		pids = append(pids, n)
	}
	return pids
}

// liveProcess reports whether pid exists and is not a zombie.
func liveProcess(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] != "Z"
}

// stepProcessAlive reports whether the process a step of run runID knew as
// pid (`echo $$`) still lives. In the job sandbox a step's pids are those
// of its own PID namespace: the host process is the one whose innermost
// NSpid is pid (the host pid itself outside a namespace) and whose
// environment carries the run's id.
func stepProcessAlive(runID string, pid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		host, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			ids, ok := strings.CutPrefix(line, "NSpid:")
			if !ok {
				continue
			}
			f := strings.Fields(ids)
			if len(f) == 0 || f[len(f)-1] != strconv.Itoa(pid) {
				break
			}
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			if strings.Contains(string(env), "KICI_RUN_ID="+runID+"\x00") && liveProcess(host) {
				return true
			}
		}
	}
	return false
}

// agentPIDs lists live kici-agent processes serving this orchestrator.
func (o *orchestrator) agentPIDs() []int {
	marker := "KICI_ORCHESTRATOR_URL=ws://" + strings.TrimPrefix(o.url, "http://") + "/ws"
	var out []int
	for _, p := range agentProcesses(marker) {
		comm, _ := os.ReadFile("/proc/" + p + "/comm")
		if strings.TrimSpace(string(comm)) == "kici-agent" {
			n, _ := strconv.Atoi(p)
			if liveProcess(n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// assertNothingLeft checks within 10 s that no process of the run remains
// (steps carry KICI_RUN_ID in their environment) and none of pids lives.
func assertNothingLeft(t *testing.T, runID string, pids ...int) {
	t.Helper()
	var left []string
	if !wait.Until(10*time.Second, func() bool {
		left = left[:0]
		for _, p := range agentProcesses("KICI_RUN_ID=" + runID) {
			if n, _ := strconv.Atoi(p); liveProcess(n) {
				left = append(left, p)
			}
		}
		for _, p := range pids {
			if stepProcessAlive(runID, p) {
				left = append(left, strconv.Itoa(p))
			}
		}
		return len(left) == 0
	}) {
		t.Errorf("processes of run %s still alive: %v", runID, left)
	}
}

// TestGracefulCancelSIGKILLsTrappingStepRunsCleanupAndLeavesNoProcess
// proves, end to end, that kici-admin runs cancel on a
// step that ignores SIGTERM and sleeps past the grace shows the run
// cancelling, SIGKILLs the step's whole process group after the 1 s grace,
// runs the on-cancel cleanup step, ends the run cancelled, and leaves no
// process on the host.
func TestGracefulCancelSIGKILLsTrappingStepRunsCleanupAndLeavesNoProcess(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: deploy
on: {push: {branches: [main]}}
jobs:
  deploy:
    gracePeriod: 1s
    steps:
      - name: stubborn
        run: |
          trap '' TERM
          sleep 300 &
          echo $$ $! > `+marks+`/pids
          while true; do sleep 0.1; done
      - name: never
        run: touch `+marks+`/never
      - name: unlock
        when: on-cancel
        run: touch `+marks+`/unlocked
  after:
    needs: [deploy]
    steps:
      - run: touch `+marks+`/after
`)
	o := startOrchestrator(t)
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	wait.For(t, 60*time.Second, "the stubborn step to start", func() bool {
		_, err := os.Stat(filepath.Join(marks, "pids"))
		return err == nil
	})
	pids := pidsIn(t, filepath.Join(marks, "pids"))
	start := time.Now()
	if out := o.admin(t, "runs", "cancel", runID); !strings.Contains(out, "cancelling") {
		t.Errorf("runs cancel printed %q, want the run cancelling", out)
	}
	var mid struct {
		Run runView `json:"run"`
	}
	o.get(t, "/api/v1/admin/runs/"+runID, &mid)
	if mid.Run.Status != "cancelling" && mid.Run.Status != "cancelled" {
		t.Errorf("run right after cancel = %s", mid.Run.Status)
	}
	r := o.waitRunStatus(t, runID, 60*time.Second, "cancelled", "failed", "success")
	if r.Status != "cancelled" {
		t.Fatalf("run ended %s (%s), want cancelled", r.Status, r.FailureReason)
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("run cancelled %s after the request: the 1 s grace was not honoured", el)
	}
	jobs := o.jobsOf(t, runID)
	d := jobs["deploy"]
	got := []string{}
	for _, s := range d.Steps {
		got = append(got, s.Status)
	}
	if d.Status != "cancelled" || strings.Join(got, ",") != "cancelled,skipped,success" {
		t.Errorf("deploy = %s steps %v, want cancelled with steps cancelled,skipped,success", d.Status, got)
	}
	if a := jobs["after"]; a.Status != "cancelled" {
		t.Errorf("downstream job = %s, want cancelled", a.Status)
	}
	for name, want := range map[string]bool{"unlocked": true, "never": false, "after": false} {
		if _, err := os.Stat(filepath.Join(marks, name)); (err == nil) != want {
			t.Errorf("marker %s exists = %v, want %v", name, err == nil, want)
		}
	}
	assertNothingLeft(t, runID, pids...)
	// A second cancel of the finished run is refused (409).
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), "runs", "cancel", runID)
	cmd.Env = append(os.Environ(), o.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "409") {
		t.Errorf("cancel of a finished run: err %v, stderr %q; want HTTP 409", err, stderr.String())
	}
}

// TestKillNineAgentMidStepFailsJobFastAndLeavesNothing proves, for
// single-use agents, that kill -9 of the agent mid-step fails the
// started job at once ("agent lost", never silently re-run), the run ends,
// and the step's processes die with the agent.
func TestKillNineAgentMidStepFailsJobFastAndLeavesNothing(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: long
on: {push: {branches: [main]}}
jobs:
  long:
    steps:
      - run: |
          echo $$ > `+marks+`/pid
          umask 0; echo started >> `+marks+`/starts
          while true; do sleep 0.1; done
`)
	o := startOrchestrator(t)
	runID, agent := o.startAndFindAgent(t, repo, filepath.Join(marks, "pid"))
	agents := []int{agent}
	start := time.Now()
	if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := o.waitRunStatus(t, runID, 30*time.Second, "failed", "success", "cancelled")
	if r.Status != "failed" {
		t.Errorf("run = %s, want failed", r.Status)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("run ended %s after the agent died; want fast failure", el)
	}
	j := o.jobsOf(t, runID)["long"]
	if j.Status != "failed" || !strings.Contains(j.ErrorMessage, "agent lost") {
		t.Errorf("job = %s %q, want failed with agent lost", j.Status, j.ErrorMessage)
	}
	assertNothingLeft(t, runID, pidsIn(t, filepath.Join(marks, "pid"))...)
	wait.Elapse(t.Context(), time.Second) // room for a re-run that must not come
	if b, _ := os.ReadFile(filepath.Join(marks, "starts")); strings.Count(string(b), "started") != 1 {
		t.Errorf("the started job ran %d times, want once (no silent re-run)", strings.Count(string(b), "started"))
	}
}

// TestOrchestratorKillNineRestartCompletesRunOnceAndAgentReportsLand proves
// recovery from kill -9 of the orchestrator mid-run, restart on the
// same database and address: the agent reconnects and reclaims its job by
// id, its status reports land, the downstream job is dispatched, the run
// completes, and no job runs twice.
func TestOrchestratorKillNineRestartCompletesRunOnceAndAgentReportsLand(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: twostep
on: {push: {branches: [main]}}
jobs:
  first:
    steps:
      - run: |
          umask 0; echo first >> `+marks+`/runs
          while [ ! -f `+marks+`/gate ]; do sleep 0.1; done
          echo "first done"
          echo first >> `+marks+`/finished
  second:
    needs: [first]
    steps:
      - run: umask 0; echo second >> `+marks+`/runs
`)
	dataDir := t.TempDir()
	port := freePort(t)
	o := startOrchestratorAt(t, dataDir, port)
	sourceID, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "first to start", filepath.Join(marks, "runs"), "first")
	o.kill9(t)
	// The job finishes while no orchestrator listens: its terminal status
	// must be buffered by the agent and land after the restart.
	write(t, filepath.Join(marks, "gate"), "")
	waitFileContains(t, 30*time.Second, "first to finish", filepath.Join(marks, "finished"), "first")

	o2 := startOrchestratorAt(t, dataDir, port)
	r := o2.waitRunStatus(t, runID, 90*time.Second, "success", "failed", "cancelled")
	if r.Status != "success" {
		t.Errorf("run after restart = %s (%s), want success", r.Status, r.FailureReason)
	}
	b, _ := os.ReadFile(filepath.Join(marks, "runs"))
	if got := strings.Fields(string(b)); strings.Join(got, ",") != "first,second" {
		t.Errorf("job executions = %v, want first then second, each once", got)
	}
	jobs := o2.jobsOf(t, runID)
	if f := jobs["first"]; f.Status != "success" || len(f.Steps) != 1 || f.Steps[0].Status != "success" {
		t.Errorf("first = %+v, want success with its step reported", f)
	}
	if !strings.Contains(o2.logText(t, runID, jobs["first"].JobID, 0), "first done") {
		t.Errorf("first's log lines sent while the orchestrator was down did not land")
	}
	// The restarted orchestrator still serves the same source: a new push
	// runs (agents are spawned and registered again).
	_, d2 := o2.push(t, repo, sourceID)
	if r2 := o2.waitRunStatus(t, o2.runOf(t, d2), 90*time.Second, "success", "failed", "cancelled"); r2.Status != "success" {
		t.Errorf("run after restart of a new push = %s", r2.Status)
	}
	assertNothingLeft(t, runID)
}

// TestJobWithoutAgentShowsPendingReasonThenExpires proves the "why is it
// waiting" rule and the queue timeout: a job no agent can take shows its
// pending reason in kici-admin runs jobs and the API, and ends
// timed_out_stale with that reason as its error after KICI_QUEUE_TIMEOUT_MS.
func TestJobWithoutAgentShowsPendingReasonThenExpires(t *testing.T) {
	repo := repoWithWorkflow(t, `name: gpu
on: {push: {branches: [main]}}
jobs:
  train:
    runsOn: gpu
    steps:
      - run: echo never
`)
	o := startOrchestrator(t, "KICI_QUEUE_TIMEOUT_MS=3000", "KICI_QUEUE_SWEEP_INTERVAL_MS=200")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	const why = "unroutable: no agent online; no scaler label set serves runsOn [gpu]"
	wait.For(t, 10*time.Second, "the pending reason", func() bool {
		return o.jobsOf(t, runID)["train"].RoutingReason == why
	})
	if out := o.admin(t, "runs", "jobs", runID); !strings.Contains(out, why) || !strings.Contains(out, "queued") {
		t.Errorf("runs jobs does not show the queued job with its reason:\n%s", out)
	}
	r := o.waitRunStatus(t, runID, 20*time.Second, "failed", "success", "cancelled")
	if r.Status != "failed" {
		t.Errorf("run = %s", r.Status)
	}
	j := o.jobsOf(t, runID)["train"]
	if j.Status != "timed_out_stale" || j.ErrorMessage != "queue timeout (3s) expired: "+why {
		t.Errorf("job = %s %q", j.Status, j.ErrorMessage)
	}
}

// TestDrainFinishesRunningJobsHoldsQueuedOnesAndResumeDispatches proves
// the drain contract (a drained orchestrator also spawns
// nothing): running jobs finish, new ones stay queued with reason
// "draining", resume dispatches them.
func TestDrainFinishesRunningJobsHoldsQueuedOnesAndResumeDispatches(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: gated
on: {push: {branches: [main]}}
jobs:
  work:
    steps:
      - run: |
          umask 0; echo run >> `+marks+`/runs
          while [ ! -f `+marks+`/gate ]; do sleep 0.1; done
`)
	o := startOrchestrator(t)
	src, d1 := o.push(t, repo, "")
	run1 := o.runOf(t, d1)
	wait.For(t, 60*time.Second, "run 1 to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(marks, "runs"))
		return len(b) > 0
	})
	if out := o.admin(t, "orchestrator", "drain"); !strings.Contains(out, "draining, 1 job(s) running") {
		t.Errorf("drain printed %q", out)
	}
	_, d2 := o.push(t, repo, src)
	run2 := o.runOf(t, d2)
	wait.For(t, 10*time.Second, "run 2 held with reason draining", func() bool {
		j := o.jobsOf(t, run2)["work"]
		return j.Status == "queued" && j.RoutingReason == "draining"
	})
	write(t, filepath.Join(marks, "gate"), "")
	if r := o.waitRunStatus(t, run1, 30*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("running run during drain ended %s", r.Status)
	}
	wait.Elapse(t.Context(), time.Second) // room for a dispatch that must not come
	if j := o.jobsOf(t, run2)["work"]; j.Status != "queued" {
		t.Errorf("queued job during drain = %s, want still queued", j.Status)
	}
	if n := len(o.agentPIDs()); n != 0 {
		t.Errorf("%d agents running while drained with nothing to do", n)
	}
	if out := o.admin(t, "orchestrator", "drain", "--status"); !strings.Contains(out, "draining, 0 job(s) running") {
		t.Errorf("drain --status printed %q", out)
	}
	if out := o.admin(t, "orchestrator", "resume"); !strings.Contains(out, "accepting jobs") {
		t.Errorf("resume printed %q", out)
	}
	if r := o.waitRunStatus(t, run2, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("held run after resume ended %s", r.Status)
	}
}

// TestConcurrencyGroupNewestPushCancelsInProgressRun proves
// cancel-in-progress (KiCI's default): a second push to the same group
// cancels the first run, which ends cancelled, and the second succeeds.
func TestConcurrencyGroupNewestPushCancelsInProgressRun(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: deploy
on: {push: {branches: [main]}}
concurrency: deploy-${branch}
jobs:
  deploy:
    steps:
      - run: |
          if [ -f `+marks+`/first ]; then echo second run; exit 0; fi
          touch `+marks+`/first
          while true; do sleep 0.1; done
`)
	o := startOrchestrator(t)
	src, d1 := o.push(t, repo, "")
	run1 := o.runOf(t, d1)
	wait.For(t, 60*time.Second, "run 1 to start", func() bool {
		_, err := os.Stat(filepath.Join(marks, "first"))
		return err == nil
	})
	_, d2 := o.push(t, repo, src)
	run2 := o.runOf(t, d2)
	r1 := o.waitRunStatus(t, run1, 60*time.Second, "cancelled", "failed", "success")
	r2 := o.waitRunStatus(t, run2, 60*time.Second, "cancelled", "failed", "success")
	if r1.Status != "cancelled" || r2.Status != "success" {
		t.Errorf("runs = %s, %s; want cancelled, success", r1.Status, r2.Status)
	}
	if j := o.jobsOf(t, run1)["deploy"]; !strings.Contains(j.ErrorMessage, "superseded by run "+run2+" in concurrency group 'deploy-main'") {
		t.Errorf("first run's job error = %q", j.ErrorMessage)
	}
	assertNothingLeft(t, run1)
}

// TestConcurrencyGroupQueuedRunsRunOneAfterTheOther proves the queue half
// of concurrency groups: with cancelInProgress false the second run waits,
// pending, until the first ends, then runs; executions never overlap.
func TestConcurrencyGroupQueuedRunsRunOneAfterTheOther(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: migrate
on: {push: {branches: [main]}}
concurrency: {group: "db-${repo}", cancelInProgress: false}
jobs:
  migrate:
    steps:
      - run: |
          umask 0; echo "start $KICI_RUN_ID" >> `+marks+`/log
          while [ ! -f `+marks+`/gate ]; do sleep 0.1; done
          umask 0; echo "end $KICI_RUN_ID" >> `+marks+`/log
`)
	o := startOrchestrator(t)
	src, d1 := o.push(t, repo, "")
	run1 := o.runOf(t, d1)
	wait.For(t, 60*time.Second, "run 1 to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(marks, "log"))
		return len(b) > 0
	})
	_, d2 := o.push(t, repo, src)
	run2 := o.runOf(t, d2)
	wait.Elapse(t.Context(), 2*time.Second) // room for a dispatch that must not come
	if j := o.jobsOf(t, run2)["migrate"]; j.Status != "pending" {
		t.Errorf("second run's job while the first holds the group = %s, want pending", j.Status)
	}
	write(t, filepath.Join(marks, "gate"), "")
	for _, id := range []string{run1, run2} {
		if r := o.waitRunStatus(t, id, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
			t.Errorf("run %s = %s", id, r.Status)
		}
	}
	b, _ := os.ReadFile(filepath.Join(marks, "log"))
	want := fmt.Sprintf("start %s\nend %s\nstart %s\nend %s\n", run1, run1, run2, run2)
	if string(b) != want {
		t.Errorf("executions overlapped or ran out of order:\n%s\nwant:\n%s", b, want)
	}

	// Rerun: a new run of the finished run at the same commit, linked to it.
	rerun := o.admin(t, "runs", "rerun", run1, "--quiet")
	r := o.waitRunStatus(t, rerun, 60*time.Second, "success", "failed", "cancelled")
	var view struct {
		Run struct {
			runView
			ParentRunID string `json:"parentRunId"`
		} `json:"run"`
	}
	o.get(t, "/api/v1/admin/runs/"+rerun, &view)
	var first struct {
		Run runView `json:"run"`
	}
	o.get(t, "/api/v1/admin/runs/"+run1, &first)
	if r.Status != "success" || view.Run.ParentRunID != run1 || view.Run.SHA != first.Run.SHA {
		t.Errorf("rerun %s = %s parent %q sha %s, want success, parent %s, sha %s", rerun, r.Status, view.Run.ParentRunID, view.Run.SHA, run1, first.Run.SHA)
	}
	if b, _ := os.ReadFile(filepath.Join(marks, "log")); !strings.HasSuffix(string(b), "end "+rerun+"\n") {
		t.Errorf("the rerun did not execute the job:\n%s", b)
	}
}

// mintStaticToken issues a static agent token straight in the database of
// a running orchestrator (there is no admin route for agent tokens yet).
func mintStaticToken(t *testing.T, dataDir string) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dataDir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, _, err := auth.NewAgentAuth(st).IssueStatic(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startStaticAgent runs kici-agent with a static token and label
// static-box; it is stopped at cleanup.
func startStaticAgent(t *testing.T, port int, token, logName string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "kici-agent"))
	cmd.Env = append(cleanEnv(), "KICI_ORCHESTRATOR_URL=ws://127.0.0.1:"+strconv.Itoa(port)+"/ws",
		"KICI_AGENT_TOKEN="+token, "KICI_AGENT_ID=static-1", "KICI_LABELS=static-box", "KICI_WORK_DIR="+stepDir(t, 0o711))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("agent log %s:\n%s", logName, b)
		}
	})
	return cmd
}

// staticGatedWorkflow is a one-job workflow for the static-box agent whose
// step appends "start <run id>" to marks/runs, then waits for marks/gate.
func staticGatedWorkflow(marks string) string {
	return `name: static
on: {push: {branches: [main]}}
jobs:
  work:
    runsOn: static-box
    steps:
      - run: |
          umask 0; echo "start $KICI_RUN_ID" >> ` + marks + `/runs
          while [ ! -f ` + marks + `/gate ]; do sleep 0.1; done
`
}

// waitFileContains waits until the file at path contains substr.
func waitFileContains(t *testing.T, timeout time.Duration, what, path, substr string) {
	t.Helper()
	wait.For(t, timeout, what, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), substr)
	})
}

// TestStaticAgentSurvivesOrchestratorRestartAndRestartedAgentFailsOrphan
// proves, with a static agent, that after kill -9 and restart
// of the orchestrator the agent reclaims its running job by id, reports it,
// and takes new jobs; an agent that is itself killed and restarted with the
// same identity re-registers without its job, which then fails at once
// instead of hanging until a timeout.
func TestStaticAgentSurvivesOrchestratorRestartAndRestartedAgentFailsOrphan(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, staticGatedWorkflow(marks))
	dataDir, port := t.TempDir(), freePort(t)
	env := []string{"KICI_RECOVERY_WINDOW_MS=60000"}
	o := startOrchestratorAt(t, dataDir, port, env...)
	tok := mintStaticToken(t, dataDir)
	agent := startStaticAgent(t, port, tok, "agent-1.log")
	src, d1 := o.push(t, repo, "")
	run1 := o.runOf(t, d1)
	waitFileContains(t, 30*time.Second, "run 1 on the static agent", filepath.Join(marks, "runs"), run1)
	o.kill9(t)
	o2 := startOrchestratorAt(t, dataDir, port, env...)
	write(t, filepath.Join(marks, "gate"), "")
	if r := o2.waitRunStatus(t, run1, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("run 1 after the restart = %s (%s)", r.Status, r.FailureReason)
	}
	_, d2 := o2.push(t, repo, src)
	run2 := o2.runOf(t, d2)
	if r := o2.waitRunStatus(t, run2, 60*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("new job after the restart = %s", r.Status)
	}

	// Row 29: the agent dies mid-job and comes back with the same identity.
	os.Remove(filepath.Join(marks, "gate"))
	_, d3 := o2.push(t, repo, src)
	run3 := o2.runOf(t, d3)
	waitFileContains(t, 30*time.Second, "run 3 on the static agent", filepath.Join(marks, "runs"), run3)
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()
	wait.For(t, 10*time.Second, "the job to be recovering", func() bool {
		return o2.jobsOf(t, run3)["work"].Status == "recovering"
	})
	startStaticAgent(t, port, tok, "agent-2.log")
	start := time.Now()
	r := o2.waitRunStatus(t, run3, 30*time.Second, "failed", "success", "cancelled")
	if j := o2.jobsOf(t, run3)["work"]; r.Status != "failed" || !strings.Contains(j.ErrorMessage, "re-registered without the job") {
		t.Errorf("orphaned job = %s %q (run %s)", j.Status, j.ErrorMessage, r.Status)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("orphaned job failed after %s; want at once, not after the 60 s recovery window", el)
	}
	assertNothingLeft(t, run3)
}

// TestStalledAgentJobTimesOutStaleAndRunEnds proves the
// stale-job timeout for a stalled (not dead) worker: a static agent frozen with SIGSTOP keeps its
// socket open but sends no job heartbeat; the job becomes timed_out_stale
// within the stale threshold, the run fails, and once the agent thaws it
// obeys the orchestrator's cancel and its step leaves nothing running.
func TestStalledAgentJobTimesOutStaleAndRunEnds(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: stall
on: {push: {branches: [main]}}
jobs:
  long:
    runsOn: static-box
    steps:
      - run: |
          echo $$ > `+marks+`/pid
          while true; do sleep 0.1; done
`)
	dataDir, port := t.TempDir(), freePort(t)
	o := startOrchestratorAt(t, dataDir, port, "KICI_JOB_HEARTBEAT_INTERVAL_MS=300", "KICI_STALE_DETECTOR_THRESHOLD_MULTIPLIER=3",
		"KICI_STALE_DETECTOR_SCAN_INTERVAL_MS=200")
	agent := startStaticAgent(t, port, mintStaticToken(t, dataDir), "agent.log", "KICI_JOB_HEARTBEAT_INTERVAL_MS=300")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	wait.For(t, 60*time.Second, "the step to start", func() bool {
		_, err := os.Stat(filepath.Join(marks, "pid"))
		return err == nil
	})
	wait.Elapse(t.Context(), time.Second) // several heartbeats: the job is healthy
	if j := o.jobsOf(t, runID)["long"]; j.Status != "running" {
		t.Fatalf("heartbeating job = %s, want running", j.Status)
	}
	agents := []int{agent.Process.Pid}
	if err := syscall.Kill(agents[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(agents[0], syscall.SIGCONT)
		}
	}()
	r := o.waitRunStatus(t, runID, 20*time.Second, "failed", "success", "cancelled")
	j := o.jobsOf(t, runID)["long"]
	if r.Status != "failed" || j.Status != "timed_out_stale" || !strings.HasPrefix(j.ErrorMessage, "no heartbeat for") {
		t.Errorf("run %s, job %s %q; want failed / timed_out_stale no heartbeat", r.Status, j.Status, j.ErrorMessage)
	}
	_ = syscall.Kill(agents[0], syscall.SIGCONT)
	thawed = true
	assertNothingLeft(t, runID, pidsIn(t, filepath.Join(marks, "pid"))...)
	if j := o.jobsOf(t, runID)["long"]; j.Status != "timed_out_stale" {
		t.Errorf("the thawed agent's late report changed the job to %s", j.Status)
	}
}

// TestAgentSIGUSR1DrainsFinishesJobAndExits: SIGUSR1 makes a static agent
// finish its running job, take no new one (it stays queued), and exit 0.
func TestAgentSIGUSR1DrainsFinishesJobAndExits(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, staticGatedWorkflow(marks))
	dataDir, port := t.TempDir(), freePort(t)
	o := startOrchestratorAt(t, dataDir, port)
	agent := startStaticAgent(t, port, mintStaticToken(t, dataDir), "agent.log")
	src, d1 := o.push(t, repo, "")
	run1 := o.runOf(t, d1)
	waitFileContains(t, 30*time.Second, "run 1 on the static agent", filepath.Join(marks, "runs"), run1)
	if err := agent.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	agentLog := agent.Stdout.(*os.File).Name()
	waitFileContains(t, 10*time.Second, "the agent to drain", agentLog, "draining: finishing the running job")
	_, d2 := o.push(t, repo, src)
	run2 := o.runOf(t, d2)
	write(t, filepath.Join(marks, "gate"), "")
	if r := o.waitRunStatus(t, run1, 30*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Errorf("job running at SIGUSR1 ended %s, want success", r.Status)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("drained agent exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("drained agent did not exit")
	}
	if j := o.jobsOf(t, run2)["work"]; j.Status != "queued" {
		t.Errorf("job pushed after SIGUSR1 = %s, want queued (not taken by the draining agent)", j.Status)
	}
}

// TestOrchestratorSIGTERMEndsSpawnedAgentsJobsAsCancelled proves a graceful
// stop never leaves a job "running" on an agent that no longer exists: once
// the shutdown grace is over, the
// spawned agent is stopped while its socket is still served, its job's
// cancelled status lands, and a restarted orchestrator shows it at once.
func TestOrchestratorSIGTERMEndsSpawnedAgentsJobsAsCancelled(t *testing.T) {
	marks := marksDir(t)
	repo := repoWithWorkflow(t, `name: slow
on: {push: {branches: [main]}}
jobs:
  wait:
    steps:
      - run: |
          umask 0; echo started >> `+marks+`/runs
          sleep 60
`)
	dataDir := t.TempDir()
	port := freePort(t)
	// The job outlasts the drain before stopping (KICI_SHUTDOWN_GRACE_MS).
	o := startOrchestratorAt(t, dataDir, port, "KICI_SHUTDOWN_GRACE_MS=1000")
	_, delivery := o.push(t, repo, "")
	runID := o.runOf(t, delivery)
	waitFileContains(t, 60*time.Second, "the step to start", filepath.Join(marks, "runs"), "started")
	agents := o.agentPIDs()
	o.stop(t)

	o2 := startOrchestratorAt(t, dataDir, port)
	jobs := o2.jobsOf(t, runID)
	if j := jobs["wait"]; j.Status != "cancelled" || !strings.Contains(j.ErrorMessage, "shutting down") {
		t.Errorf("job after a graceful stop and restart = %q (%q), want cancelled because the agent was shut down", j.Status, j.ErrorMessage)
	}
	if r := o2.waitRunStatus(t, runID, 30*time.Second, "success", "failed", "cancelled"); r.Status != "cancelled" {
		t.Errorf("run = %s, want cancelled", r.Status)
	}
	assertNothingLeft(t, runID, agents...)
}
