package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// flowWorkflow exercises outputs, conditions, a failure with a `when:
// always` cleanup step, skip propagation, an always-edge and a dispatch
// trigger with typed inputs.
const flowWorkflow = `name: flow
on:
  push:
    branches: [main]
  dispatch:
    inputs:
      target: {type: choice, values: [staging, prod]}
      count: {type: number, default: 1}
      dry: {type: boolean, default: true}
jobs:
  a:
    outputs: {version: meta.version}
    steps:
      - name: meta
        run: echo "version=2.4.0" >> "$KICI_OUTPUT"
  b:
    needs: [a]
    if: needs.a.outputs.version startsWith "2."
    env:
      VERSION: "v${{ needs.a.outputs.version }}"
    run: echo "b sees $VERSION"
  c:
    needs: [a]
    if: needs.a.outputs.version == "1.0"
    run: echo "c ran"
  fail:
    needs: [b]
    steps:
      - name: boom
        run: exit 3
      - name: tidy
        when: always
        run: echo "tidy ran"
  after:
    needs: [fail]
    run: echo "after ran"
  report:
    needs: [{job: fail, when: always}]
    run: echo "report ran"
  deploy:
    if: inputs.target == "prod"
    run: echo "deploy $KICI_INPUT_TARGET count=$KICI_INPUT_COUNT dry=$KICI_INPUT_DRY"
`

// post sends an admin POST with body encoded as JSON.
func (o *orchestrator) post(t *testing.T, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	return o.do(t, "POST", path, string(b))
}

func (o *orchestrator) waitRunID(t *testing.T, runID string, timeout time.Duration) runView {
	t.Helper()
	var r struct {
		Run runView `json:"run"`
	}
	if !wait.Until(timeout, func() bool {
		o.get(t, "/api/v1/admin/runs/"+runID, &r)
		s := r.Run.Status
		return s == "success" || s == "failed" || s == "cancelled"
	}) {
		t.Fatalf("run %s not terminal within %s", runID, timeout)
	}
	return r.Run
}

// TestWorkflowOutputsConditionsManualRunsAndDrift is the acceptance test of
// outputs, conditions, manual runs and the drift check, on a real
// orchestrator with spawned agents, and compares the server's job statuses
// with `kici run local` on the same lock.
func TestWorkflowOutputsConditionsManualRunsAndDrift(t *testing.T) {
	repo := repoWithWorkflows(t, map[string]string{"flow.yaml": flowWorkflow})

	o := startOrchestrator(t)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "flow", "--quiet")

	// 1. A push: a's output drives b's if and env; c's false condition
	// skips it with the condition as its reason.
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	pushRun := o.waitRun(t, delivery, 4*time.Minute)
	jobs := o.jobsOf(t, pushRun.RunID)
	server := map[string]string{}
	for name, j := range jobs {
		server[name] = j.Status
	}
	want := map[string]string{"a": "success", "b": "success", "c": "skipped", "fail": "failed",
		"after": "skipped", "report": "success", "deploy": "skipped"}
	for name, st := range want {
		if server[name] != st {
			t.Errorf("server job %s = %q, want %q", name, server[name], st)
		}
	}
	if got := jobs["a"].Outputs["version"]; got != "2.4.0" {
		t.Errorf("a outputs = %v", jobs["a"].Outputs)
	}
	if msg := jobs["c"].ErrorMessage; msg != `condition_false: if needs.a.outputs.version == "1.0"` {
		t.Errorf("c reason = %q", msg)
	}
	if msg := jobs["deploy"].ErrorMessage; msg != `condition_false: if inputs.target == "prod"` {
		t.Errorf("deploy reason = %q", msg)
	}
	if log := o.logText(t, pushRun.RunID, jobs["b"].JobID, 0); !strings.Contains(log, "b sees v2.4.0") {
		t.Errorf("b log = %q", log)
	}
	if f := jobs["fail"]; len(f.Steps) != 2 || f.Steps[1].Status != "success" {
		t.Errorf("fail steps = %+v, want the when: always step to run", f.Steps)
	}
	if out := o.admin(t, "runs", "jobs", pushRun.RunID); !strings.Contains(out, "outputs of a:\n  version = 2.4.0") {
		t.Errorf("runs jobs does not show the outputs:\n%s", out)
	}

	// The same lock under kici run local gives the same statuses.
	localOut, _ := exec.Command(filepath.Join(binDir, "kici"), "run", "local", "push", "--branch", "main", "--dir", repo, "--committed").CombinedOutput()
	line := regexp.MustCompile(`(?m)^  (\S+)\s+(success|failed|skipped|cancelled)\b`)
	local := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(string(localOut), -1) {
		local[m[1]] = m[2]
	}
	if len(local) != len(server) {
		t.Errorf("local run has %d jobs, server %d:\n%s", len(local), len(server), localOut)
	}
	for name, st := range server {
		if local[name] != st {
			t.Errorf("job %s: local %q, server %q\n%s", name, local[name], st, localOut)
		}
	}

	// 2. Manual runs with typed inputs, through the CLI and the API.
	id := o.admin(t, "runs", "start", "--source", sourceID, "--workflow", "flow", "--ref", "main",
		"--input", "target=prod", "--input", "count=3", "--quiet")
	manual := o.waitRunID(t, id, 4*time.Minute)
	mj := o.jobsOf(t, manual.RunID)
	if mj["deploy"].Status != "success" {
		t.Fatalf("manual deploy = %+v", mj["deploy"])
	}
	if log := o.logText(t, manual.RunID, mj["deploy"].JobID, 0); !strings.Contains(log, "deploy prod count=3 dry=true") {
		t.Errorf("deploy log = %q", log)
	}
	code, body := o.post(t, "/api/v1/admin/runs", map[string]any{"sourceId": sourceID, "workflow": "flow", "inputs": map[string]any{"target": "staging", "dry": false}})
	if code != 201 || !strings.Contains(body, `"runId"`) {
		t.Errorf("API manual run: %d %s", code, body)
	}
	for _, c := range []struct {
		inputs map[string]any
		want   string
	}{
		{map[string]any{"target": "moon"}, `input \"target\": must be one of staging, prod`},
		{map[string]any{}, `input \"target\" is required`},
		{map[string]any{"target": "prod", "count": "many"}, `input \"count\": \"many\" is not a number`},
		{map[string]any{"target": "prod", "dry": "perhaps"}, `input \"dry\": must be true or false`},
	} {
		code, body := o.post(t, "/api/v1/admin/runs", map[string]any{"sourceId": sourceID, "workflow": "flow", "inputs": c.inputs})
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("inputs %v: %d %s, want 400 with %s", c.inputs, code, body, c.want)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "kici-admin"), "runs", "start", "--source", sourceID, "--workflow", "flow", "--input", "count=x")
	cmd.Env = append(cleanEnv(), o.env...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `input "target" is required`) || !strings.Contains(string(out), `input "count"`) {
		t.Errorf("CLI with bad inputs: %v\n%s", err, out)
	}

	// 3. Drift: the YAML is edited and committed without recompiling.
	write(t, filepath.Join(repo, ".kici/workflows/flow.yaml"), strings.Replace(flowWorkflow, `echo "report ran"`, `echo "report changed"`, 1))
	git(t, repo, "commit", "-qam", "edit without recompiling")
	delivery = o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	drifted := o.waitRun(t, delivery, 4*time.Minute)
	dj := o.jobsOf(t, drifted.RunID)
	wantMsg := "workflow drift: .kici/workflows/flow.yaml does not match the lock file .kici/kici.lock.json (its contentHash differs): run `kici compile` and commit both"
	if drifted.Status != "failed" || dj["a"].Status != "failed" || dj["a"].ErrorMessage != wantMsg {
		t.Errorf("drifted run %s: a = %+v", drifted.Status, dj["a"])
	}
	prev := exec.Command(filepath.Join(binDir, "kici"), "preview", "push", "--branch", "main", "--dir", repo)
	if out, err := prev.CombinedOutput(); err == nil || !strings.Contains(string(out), wantMsg) {
		t.Errorf("kici preview of the drifted tree: %v\n%s", err, out)
	}
}
