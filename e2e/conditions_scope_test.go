package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scopedWorkflow: a typed dispatch input read by step conditions on a
// push run, an earlier step's output in a later step's env, the job's env
// in a step condition, and a hyphenated step name in its index form.
const scopedWorkflow = `name: scoped
on:
  push: {branches: [main]}
  dispatch:
    inputs:
      repeat: {type: integer, default: 1}
jobs:
  build:
    env:
      DEPLOY: "yes"
    steps:
      - name: meta
        run: echo "version=3.1.4" >> "$KICI_OUTPUT"
      - name: show
        env:
          VERSION: "v${{ steps.meta.outputs.version }}"
        run: echo "version is $VERSION"
      - name: repeated
        if: inputs.repeat > 2
        run: echo "repeated"
      - name: once
        if: inputs.repeat == 1
        run: echo "repeat=$KICI_INPUT_REPEAT"
      - name: deploy
        if: env.DEPLOY == "yes" && env.KICI_JOB_NAME == "build"
        run: echo deploying
      - name: cross-build
        run: "true"
      - name: after-cross
        if: steps["cross-build"].outcome == "success"
        run: echo after cross
  raw:
    outputs: {text: emit.text}
    steps:
      - name: emit
        run: printf 'text=%s{{ env.DEPLOY }}\n' '$' >> "$KICI_OUTPUT"
  reader:
    needs: [raw]
    env:
      DEPLOY: "no"
    steps:
      - name: meta
        run: printf 'inner=%s{{ env.DEPLOY }}\n' '$' >> "$KICI_OUTPUT"
      - name: read
        env:
          FROM_JOB: "${{ needs.raw.outputs.text }}"
          FROM_STEP: "${{ steps.meta.outputs.inner }}"
        run: echo "from-job=$FROM_JOB from-step=$FROM_STEP"
`

// A push run of a workflow whose steps read typed inputs (at their
// declared defaults), earlier steps' outputs and the job's env: every step
// runs or skips as its condition says, on the server and under kici run
// local.
func TestConditionsOverInputsStepsAndEnv(t *testing.T) {
	repo := repoWithWorkflow(t, scopedWorkflow)
	o := startOrchestrator(t)
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "scoped", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	r := o.waitRun(t, delivery, 3*time.Minute)
	j := o.jobsOf(t, r.RunID)["build"]
	if r.Status != "success" || j.Status != "success" {
		t.Fatalf("run %s, build %s %q", r.Status, j.Status, j.ErrorMessage)
	}
	want := map[string]string{"meta": "success", "show": "success", "repeated": "skipped", "once": "success",
		"deploy": "success", "cross-build": "success", "after-cross": "success"}
	for _, s := range j.Steps {
		if want[s.StepName] != s.Status {
			t.Errorf("step %s = %s, want %s", s.StepName, s.Status, want[s.StepName])
		}
	}
	if log := o.logText(t, r.RunID, j.JobID, 1); !strings.Contains(log, "version is v3.1.4") {
		t.Errorf("show log = %q", log)
	}
	if log := o.logText(t, r.RunID, j.JobID, 3); !strings.Contains(log, "repeat=1") {
		t.Errorf("once log = %q", log)
	}
	// An output that holds "${{ … }}" is data: expanded once, never again.
	rd := o.jobsOf(t, r.RunID)["reader"]
	if log := o.logText(t, r.RunID, rd.JobID, 1); !strings.Contains(log, "from-job=${{ env.DEPLOY }} from-step=${{ env.DEPLOY }}") {
		t.Errorf("reader log = %q (%s %q)", log, rd.Status, rd.ErrorMessage)
	}

	out, err := exec.Command(filepath.Join(binDir, "kici"), "run", "local", "push", "--branch", "main", "--dir", repo, "--committed").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "version is v3.1.4") || !strings.Contains(string(out), "repeat=1") || strings.Contains(string(out), "condition_error") {
		t.Errorf("kici run local: %v\n%s", err, out)
	}
}
