package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// outputsWorkflow: a's output drives b's if and env; c's condition is false
// (skipped with its reason) and d, which needs c, is skipped in turn; a
// manual input reaches the job as KICI_INPUT_TARGET and in a condition.
const outputsWorkflow = `name: outputs
on:
  push: {}
  dispatch:
    inputs:
      target: {type: choice, values: [staging, prod], default: staging}
jobs:
  a:
    outputs: {version: meta.version, notes: meta.notes}
    steps:
      - name: meta
        run: |
          echo "version=$(cat VERSION)" >> "$KICI_OUTPUT"
          printf 'notes<<EOF\nline one\nline two\nEOF\n' >> "$KICI_OUTPUT"
  b:
    needs: [a]
    if: needs.a.outputs.version startsWith "2."
    env:
      VERSION: "${{ needs.a.outputs.version }}"
      NOTES: "${{ needs.a.outputs.notes }}"
    run: echo "b got $VERSION / $(echo "$NOTES" | wc -l) lines / target=$KICI_INPUT_TARGET"
  c:
    needs: [a]
    if: needs.a.outputs.version == "1.0"
    run: echo c ran
  d:
    needs: [c]
    run: echo d ran
  e:
    if: inputs.target == "prod"
    run: echo "deploying to $KICI_INPUT_TARGET"
`

func gitIn(t *testing.T, repo string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestRunLocalOutputsConditionsAndDirtyTree: the dirty working tree runs
// by default (an uncommitted edit and an untracked file are seen),
// --committed runs HEAD, outputs and conditions follow the orchestrator's
// tracker, and the user's git state is left as it was.
func TestRunLocalOutputsConditionsAndDirtyTree(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"outputs.yaml": outputsWorkflow})
	if err := os.WriteFile(filepath.Join(repo, "VERSION"), []byte("1.9.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "add", "VERSION")
	gitIn(t, repo, "commit", "-qm", "version")
	if err := os.WriteFile(filepath.Join(repo, "VERSION"), []byte("2.1.0\n"), 0o644); err != nil { // uncommitted edit
		t.Fatal(err)
	}
	before, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output()

	out, stderr, code := runKici(t, bin, repo, "run", "local", "push", "--branch", "main")
	if code != 0 {
		t.Fatalf("dirty run: %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{
		"b got 2.1.0 / 2 lines / target=",
		`c                                        skipped (condition_false: if needs.a.outputs.version == "1.0")`,
		"d                                        skipped (upstream_unmet: c (skipped))",
		`e                                        skipped (condition_false: if inputs.target == "prod")`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("dirty run output lacks %q:\n%s", want, out)
		}
	}
	if after, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output(); string(after) != string(before) {
		t.Fatalf("git status changed:\n%s\nwas\n%s", after, before)
	}
	if refs, _ := exec.Command("git", "-C", repo, "for-each-ref", "refs/kici").Output(); len(refs) != 0 {
		t.Fatalf("temporary refs left: %s", refs)
	}

	out, _, code = runKici(t, bin, repo, "run", "local", "push", "--branch", "main", "--committed")
	if code != 0 || !strings.Contains(out, "b                                        skipped (condition_false: if needs.a.outputs.version startsWith") {
		t.Fatalf("committed run (%d):\n%s", code, out)
	}

	out, stderr, code = runKici(t, bin, repo, "run", "local", "dispatch", "--input", "target=prod")
	if code != 0 || !strings.Contains(out, "deploying to prod") || !strings.Contains(out, "target=prod") {
		t.Fatalf("dispatch run (%d):\n%s\n%s", code, out, stderr)
	}
	_, stderr, code = runKici(t, bin, repo, "run", "local", "dispatch", "--input", "target=moon")
	if code != 1 || !strings.Contains(stderr, `input "target": must be one of staging, prod`) {
		t.Fatalf("bad input (%d): %s", code, stderr)
	}
}

// TestStaleLockRefused: a workflow edited without recompiling is refused
// by kici preview and kici run local with the drift message; --compile
// uses the edited file.
func TestStaleLockRefused(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"ci.yaml": "on: push\njobs:\n  a: {run: echo old}\n"})
	if err := os.WriteFile(filepath.Join(repo, ".kici", "workflows", "ci.yaml"), []byte("on: push\njobs:\n  a: {run: echo new-step}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "workflow drift: .kici/workflows/ci.yaml does not match the lock file .kici/kici.lock.json (its contentHash differs): run `kici compile`"
	for _, args := range [][]string{{"preview", "push", "--branch", "main"}, {"run", "local", "push", "--branch", "main"}} {
		_, stderr, code := runKici(t, bin, repo, args...)
		if code != 1 || !strings.Contains(stderr, want) {
			t.Fatalf("%v: %d %s", args, code, stderr)
		}
	}
	out, stderr, code := runKici(t, bin, repo, "run", "local", "push", "--branch", "main", "--compile")
	if code != 0 || !strings.Contains(out, "new-step") {
		t.Fatalf("--compile: %d\n%s\n%s", code, out, stderr)
	}
	// Committed, the edit is the run's commit: same refusal on --committed.
	gitIn(t, repo, "commit", "-qam", "edit without recompiling")
	if _, stderr, code := runKici(t, bin, repo, "run", "local", "push", "--branch", "main", "--committed"); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("--committed: %d %s", code, stderr)
	}
}
