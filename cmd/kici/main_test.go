package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildKici builds the real binary once per test.
func buildKici(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kici")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runKici(t *testing.T, bin, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCLI(t *testing.T) {
	bin := buildKici(t)
	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	sub := filepath.Join(repo, "deep", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}

	// compile before init: no workflows
	if _, stderr, code := runKici(t, bin, repo, "compile"); code != 1 || !strings.Contains(stderr, "kici init") {
		t.Fatalf("compile without workflows: code %d, stderr %q", code, stderr)
	}
	// init from a subdirectory writes at the repo root
	if stdout, stderr, code := runKici(t, bin, sub, "init"); code != 0 {
		t.Fatalf("init: code %d\n%s%s", code, stdout, stderr)
	}
	wf := filepath.Join(repo, ".kici", "workflows", "ci.yaml")
	orig, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runKici(t, bin, repo, "init"); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second init: code %d, stderr %q", code, stderr)
	}
	if now, _ := os.ReadFile(wf); !bytes.Equal(now, orig) {
		t.Fatal("init overwrote the workflow")
	}
	// --check before any compile: missing lock
	if _, stderr, code := runKici(t, bin, repo, "compile", "--check"); code != 1 || !strings.Contains(stderr, "missing") {
		t.Fatalf("check without lock: code %d, stderr %q", code, stderr)
	}
	// fresh compile, via --dir from elsewhere
	if stdout, stderr, code := runKici(t, bin, t.TempDir(), "compile", "--dir", sub); code != 0 || !strings.Contains(stdout, "written") {
		t.Fatalf("compile: code %d\n%s%s", code, stdout, stderr)
	}
	lock, err := os.ReadFile(filepath.Join(repo, ".kici", "kici.lock.json"))
	if err != nil || !bytes.Contains(lock, []byte(`"schemaVersion": 29`)) {
		t.Fatalf("lock: %v\n%s", err, lock)
	}
	if stdout, stderr, code := runKici(t, bin, repo, "compile", "--check"); code != 0 || strings.TrimSpace(stdout) != "lock file is up to date" {
		t.Fatalf("check fresh: code %d\n%s%s", code, stdout, stderr)
	}
	// edit ⇒ stale
	if err := os.WriteFile(wf, append(orig, []byte("# edited\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runKici(t, bin, repo, "compile", "--check"); code != 1 || strings.TrimSpace(stderr) != "lock file is stale: run kici compile" {
		t.Fatalf("check stale: code %d, stderr %q", code, stderr)
	}
	// broken YAML ⇒ file:line:col
	if err := os.WriteFile(filepath.Join(repo, ".kici", "workflows", "broken.yaml"), []byte("name: broken\njobs:\n  a:\n    run: [x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"compile"}, {"compile", "--check"}} {
		_, stderr, code := runKici(t, bin, repo, args...)
		if code != 1 || !regexp.MustCompile(`(?m)^\.kici/workflows/broken\.yaml:4:\d+: YAML syntax error`).MatchString(stderr) {
			t.Fatalf("%v with broken YAML: code %d, stderr %q", args, code, stderr)
		}
	}
	// semantic error ⇒ file:line:col too
	if err := os.WriteFile(filepath.Join(repo, ".kici", "workflows", "broken.yaml"), []byte("name: broken\njobs:\n  a:\n    needs: [zz]\n    run: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runKici(t, bin, repo, "compile"); code != 1 || !strings.Contains(stderr, `.kici/workflows/broken.yaml:4:13: job "a" needs "zz"`) {
		t.Fatalf("needs error: code %d, stderr %q", code, stderr)
	}
	// outside any repository
	if _, stderr, code := runKici(t, bin, t.TempDir(), "compile"); code != 1 || !strings.Contains(stderr, "no repository found") {
		t.Fatalf("outside repo: code %d, stderr %q", code, stderr)
	}
	// help has examples
	if stdout, _, code := runKici(t, bin, repo, "compile", "--help"); code != 0 || !strings.Contains(stdout, "kici compile --check") {
		t.Fatalf("help: %q", stdout)
	}
}
