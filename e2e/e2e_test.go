// Package e2e runs the real kici binaries end to end: kici compiles a
// workflow in a real git repository, kici-orchestrator runs on its embedded
// default (and on PostgreSQL), kici-admin registers the repository and
// triggers a push, spawned kici-agent processes run the steps, and the test
// checks what an operator would check: statuses, skips, logs, and that no
// process is left behind.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

var binDir string

// procTmp is TMPDIR for every orchestrator and agent the tests start.
var procTmp string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kici-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/kici-orchestrator", "./cmd/kici-agent", "./cmd/kici-step-supervisor", "./cmd/kici-admin", "./cmd/kici", "./cmd/kici-vm-init")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building binaries: %v\n%s", err, out)
		os.Exit(1)
	}
	binDir = dir
	// The system's processes get their own temp dir (so the default job work
	// dir, <TMPDIR>/kici-work-<uid>, and what killed agents leave there go
	// away with this run).
	procTmp = filepath.Join(dir, "tmp")
	// Searchable by others (not listable): as root, agents run steps as an
	// unprivileged user that must reach its job directory below procTmp.
	if err := os.Mkdir(procTmp, 0o711); err != nil || os.Chmod(dir, 0o711) != nil || os.Chmod(procTmp, 0o711) != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	// Steps leave marks for the tests in directories below marksRoot, the
	// one host directory every job's sandbox shares (KICI_STEP_SHARED_PATHS).
	marksRoot = filepath.Join(procTmp, "marks")
	if err := os.Mkdir(marksRoot, 0o711); err != nil || os.Chmod(marksRoot, 0o711) != nil {
		fmt.Fprintln(os.Stderr, "marks dir:", err)
		os.Exit(1)
	}
	code := pgtest.RunMain(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

const pipelineWorkflow = `name: pipeline
on:
  push:
    branches: [main]
jobs:
  first:
    steps:
      - name: hello
        run: |
          echo "hello from $KICI_JOB_NAME at $KICI_SHA"
          test -f README.txt
          env | sort | grep '^KICI_' | sed 's/=.*//'
      - name: tolerated
        continueOnError: true
        run: echo "this one fails"; exit 7
  legs:
    needs: [first]
    matrix:
      n: ["1", "2"]
    steps:
      - run: echo "leg $KICI_MATRIX_N"
  fail:
    needs: [first]
    steps:
      - name: boom
        run: echo "about to fail"; exit 3
      - name: never
        run: echo "never printed"
  after-fail:
    needs: [fail]
    steps:
      - run: echo "should not run"
  cleanup:
    needs:
      - job: fail
        when: always
    steps:
      - run: echo "cleanup ran"
`

const docsWorkflow = `name: docs
on:
  push:
    branches: [main]
    paths: ["docs/**"]
jobs:
  publish:
    steps:
      - run: echo docs
`

// git runs git in dir with a fixed identity and fails the test on error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=kici test", "GIT_AUTHOR_EMAIL=test@kici.invalid",
		"GIT_COMMITTER_NAME=kici test", "GIT_COMMITTER_EMAIL=test@kici.invalid",
		"GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// makeRepo creates a git repository on branch main with the workflows,
// compiles the lock with the kici binary and commits everything.
func makeRepo(t *testing.T) (dir, sha string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "README.txt"), "e2e fixture\n")
	write(t, filepath.Join(dir, ".kici/workflows/pipeline.yaml"), pipelineWorkflow)
	write(t, filepath.Join(dir, ".kici/workflows/docs.yaml"), docsWorkflow)
	run(t, dir, nil, filepath.Join(binDir, "kici"), "compile")
	run(t, dir, nil, filepath.Join(binDir, "kici"), "compile", "--check")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "initial")
	write(t, filepath.Join(dir, "src.txt"), "a change outside docs/\n")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "second")
	return dir, git(t, dir, "rev-parse", "HEAD")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run executes a binary and returns its stdout; it fails the test on a
// non-zero exit, showing stderr.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), args, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

type orchestrator struct {
	cmd     *exec.Cmd
	dataDir string
	url     string
	token   string
	logPath string
	env     []string
}

// loopbackSourcesEnv lets sources point at this machine's fake forges
// (ghfake listens on 127.0.0.1): without it the orchestrator refuses
// forge URLs that reach its own host (internal/netguard).
const loopbackSourcesEnv = "KICI_ALLOW_LOCAL_SOURCE_URLS=true"

// startOrchestrator starts kici-orchestrator on a fresh data dir and a free
// port, with extra environment, and stops it at cleanup.
func startOrchestrator(t *testing.T, extraEnv ...string) *orchestrator {
	t.Helper()
	o := &orchestrator{dataDir: t.TempDir()}
	o.logPath = filepath.Join(o.dataDir, "orchestrator.log")
	logFile, err := os.Create(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	o.env = append([]string{"KICI_DATA_DIR=" + o.dataDir}, extraEnv...)
	o.cmd = exec.Command(filepath.Join(binDir, "kici-orchestrator"))
	o.cmd.Env = append(cleanEnv(), append(o.env, "KICI_PORT=0")...)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.stop(t)
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(o.logPath)
			t.Logf("orchestrator log:\n%s", b)
			logs, _ := filepath.Glob(filepath.Join(o.dataDir, "agents", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("agent log %s:\n%s", filepath.Base(l), b)
			}
		}
	})
	wait.Until(30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(o.dataDir, "orchestrator.json"))
		if err == nil && len(b) > 0 {
			var ep struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(b, &ep) == nil && ep.URL != "" {
				o.url = ep.URL
			}
		}
		return o.url != ""
	})
	if o.url == "" {
		b, _ := os.ReadFile(o.logPath)
		t.Fatalf("orchestrator did not write orchestrator.json in 30s; log:\n%s", b)
	}
	tok, err := os.ReadFile(filepath.Join(o.dataDir, "admin-token"))
	if err != nil {
		t.Fatalf("bootstrap admin token not written: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(o.dataDir, "admin-token")); fi.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode = %v, want 0600", fi.Mode().Perm())
	}
	o.token = strings.TrimSpace(string(tok))
	return o
}

// cleanEnv is the test process environment without KICI_* variables, so a
// developer's own settings cannot leak into the system under test, and
// with TMPDIR=procTmp.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KICI_") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+procTmp, "KICI_STEP_SHARED_PATHS="+marksRoot)
}

func (o *orchestrator) stop(t *testing.T) {
	if o.cmd.ProcessState != nil {
		return
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- o.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		<-done
		t.Errorf("orchestrator did not stop within 30s of SIGTERM")
	}
}

// admin runs kici-admin against this orchestrator with no --url/--token
// flags: it must find both in the data directory.
func (o *orchestrator) admin(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, "", o.env, filepath.Join(binDir, "kici-admin"), args...)
}

// get fetches an admin API path and decodes the JSON answer into v.
func (o *orchestrator) get(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", o.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatalf("GET %s: %d (body: %v)", path, resp.StatusCode, err)
		}
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
}

type runView struct {
	RunID         string `json:"runId"`
	WorkflowName  string `json:"workflowName"`
	Status        string `json:"status"`
	SHA           string `json:"sha"`
	FailureReason string `json:"failureReason"`
}

type stepView struct {
	StepIndex int    `json:"stepIndex"`
	StepName  string `json:"stepName"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exitCode"`
}

type jobView struct {
	JobID        string     `json:"jobId"`
	JobName      string     `json:"jobName"`
	Status       string     `json:"status"`
	ErrorMessage string     `json:"errorMessage"`
	Steps        []stepView `json:"steps"`
}

func (o *orchestrator) waitRun(t *testing.T, deliveryID string, timeout time.Duration) runView {
	t.Helper()
	var list struct {
		Runs []runView `json:"runs"`
	}
	if !wait.Until(timeout, func() bool {
		o.get(t, "/api/v1/admin/runs?deliveryId="+deliveryID, &list)
		return len(list.Runs) > 0 && terminalRun(list.Runs[0].Status)
	}) {
		t.Fatalf("run for delivery %s not terminal within %s", deliveryID, timeout)
	}
	if len(list.Runs) != 1 {
		t.Errorf("delivery %s created %d runs, want 1 (only one workflow matches)", deliveryID, len(list.Runs))
	}
	return list.Runs[0]
}

func (o *orchestrator) logText(t *testing.T, runID, jobID string, step int) string {
	t.Helper()
	var page struct {
		Lines []struct {
			Msg string `json:"msg"`
		} `json:"lines"`
	}
	o.get(t, fmt.Sprintf("/api/v1/admin/runs/%s/jobs/%s/steps/%d/logs?limit=2000", runID, jobID, step), &page)
	var b strings.Builder
	for _, l := range page.Lines {
		b.WriteString(l.Msg)
		b.WriteByte('\n')
	}
	return b.String()
}

// agentProcesses lists live processes that carry this orchestrator's agent
// URL or one of its run ids in their environment.
func agentProcesses(markers ...string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			for _, m := range markers {
				if string(kv) == m {
					pids = append(pids, e.Name())
				}
			}
		}
	}
	return pids
}

func TestPushRunsWorkflowEndToEndSQLite(t *testing.T) {
	testPushRun(t)
}

func TestPushRunsWorkflowEndToEndPostgres(t *testing.T) {
	testPushRun(t, "KICI_DATABASE_URL="+pgtest.URL(t))
}

func testPushRun(t *testing.T, extraEnv ...string) {
	repo, sha := makeRepo(t)
	o := startOrchestrator(t, extraEnv...)

	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "fixture", "--quiet")
	if sourceID == "" {
		t.Fatal("source add printed no id")
	}
	if out := o.admin(t, "source", "list"); !strings.Contains(out, "fixture") {
		t.Errorf("source list does not show the source:\n%s", out)
	}
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	run := o.waitRun(t, delivery, 4*time.Minute)

	if run.WorkflowName != "pipeline" || run.SHA != sha {
		t.Errorf("run = %+v, want workflow pipeline at %s", run, sha)
	}
	if run.Status != "failed" || !strings.Contains(run.FailureReason, "fail") {
		t.Errorf("run status %q reason %q, want failed naming job fail", run.Status, run.FailureReason)
	}

	var jobs struct {
		Jobs []jobView `json:"jobs"`
	}
	o.get(t, "/api/v1/admin/runs/"+run.RunID+"/jobs?includeSteps=true", &jobs)
	byName := map[string]jobView{}
	for _, j := range jobs.Jobs {
		byName[j.JobName] = j
	}
	want := map[string]string{
		"first": "success", "legs (1)": "success", "legs (2)": "success",
		"fail": "failed", "after-fail": "skipped", "cleanup": "success",
	}
	if len(jobs.Jobs) != len(want) {
		t.Errorf("got %d jobs, want %d: %+v", len(jobs.Jobs), len(want), jobs.Jobs)
	}
	for name, status := range want {
		if got := byName[name].Status; got != status {
			t.Errorf("job %q status = %q, want %q", name, got, status)
		}
	}
	if msg := byName["after-fail"].ErrorMessage; !strings.Contains(msg, "upstream_unmet: fail (failed)") {
		t.Errorf("after-fail skip reason = %q", msg)
	}

	first := byName["first"]
	if len(first.Steps) != 2 || first.Steps[0].Status != "success" || first.Steps[1].Status != "failed" {
		t.Errorf("first steps = %+v, want success then failed (continueOnError)", first.Steps)
	}
	hello := o.logText(t, run.RunID, first.JobID, 0)
	if !strings.Contains(hello, "hello from first at "+sha) {
		t.Errorf("hello log lacks the greeting:\n%s", hello)
	}
	if !strings.Contains(hello, "KICI_RUN_ID") || strings.Contains(hello, "KICI_AGENT_TOKEN") || strings.Contains(hello, "KICI_ORCHESTRATOR_URL") {
		t.Errorf("step env must have job vars and no agent credentials; KICI_ names seen:\n%s", hello)
	}

	fail := byName["fail"]
	if len(fail.Steps) != 2 || fail.Steps[0].Status != "failed" || fail.Steps[0].ExitCode == nil || *fail.Steps[0].ExitCode != 3 || fail.Steps[1].Status != "skipped" {
		t.Errorf("fail steps = %+v, want boom failed with exit 3, never skipped", fail.Steps)
	}
	if boom := o.logText(t, run.RunID, fail.JobID, 0); !strings.Contains(boom, "about to fail") {
		t.Errorf("boom log = %q", boom)
	}
	if leg := o.logText(t, run.RunID, byName["legs (2)"].JobID, 0); !strings.Contains(leg, "leg 2") {
		t.Errorf("matrix leg log = %q", leg)
	}

	// The CLI sees the same: summary names the failing job, wait exits 1.
	if out := o.admin(t, "runs", "summary", run.RunID); !strings.Contains(out, "after-fail") || !strings.Contains(out, "skipped") {
		t.Errorf("runs summary:\n%s", out)
	}
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), "runs", "wait", run.RunID)
	cmd.Env = append(os.Environ(), o.env...)
	if err := cmd.Run(); err == nil {
		t.Errorf("runs wait on a failed run exited 0")
	}

	// Every spawned agent exits after its one job, and no step lingers.
	wsURL := "KICI_ORCHESTRATOR_URL=ws://" + strings.TrimPrefix(o.url, "http://") + "/ws"
	wait.Until(20*time.Second, func() bool { return len(agentProcesses(wsURL, "KICI_RUN_ID="+run.RunID)) == 0 })
	if left := agentProcesses(wsURL, "KICI_RUN_ID="+run.RunID); len(left) > 0 {
		t.Errorf("agent or step processes still running after the run: %v", left)
	}
	o.stop(t)
	if left := agentProcesses(wsURL, "KICI_RUN_ID="+run.RunID); len(left) > 0 {
		t.Errorf("processes left after orchestrator stop: %v", left)
	}
	_ = context.Background
}
