package main

import (
	"encoding/json"
	"fmt"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/testutil/fixtures"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

var (
	sharedBinOnce sync.Once
	sharedBinDir  string
	sharedBin     string
	sharedBinErr  error
)

// sharedKici builds the binary once for the author-tooling tests.
func sharedKici(t *testing.T) string {
	t.Helper()
	sharedBinOnce.Do(func() {
		sharedBinDir, sharedBinErr = os.MkdirTemp("", "kici-bin-")
		if sharedBinErr != nil {
			return
		}
		sharedBin = filepath.Join(sharedBinDir, "kici")
		out, err := exec.Command("go", "build", "-o", sharedBin, ".").CombinedOutput()
		if err != nil {
			sharedBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if sharedBinErr != nil {
		t.Fatal(sharedBinErr)
	}
	return sharedBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedBinDir != "" {
		os.RemoveAll(sharedBinDir)
	}
	os.Exit(code)
}

const authorWorkflows = `name: ci
on:
  push:
    branches: [main, "release/**"]
    paths: ["src/**", "!**/*.md"]
  pr:
    events: [opened, synchronize]
    targetBranches: [master, main]
jobs:
  lint:
    run: echo "lint on $KICI_REF"
  test:
    needs: [lint]
    matrix:
      go: ["1.25", "1.26"]
    run: echo "test go=$KICI_MATRIX_GO"
`

const failingWorkflow = `name: nightly
on:
  tag:
    patterns: ["v*"]
jobs:
  build:
    run: "exit 7"
  publish:
    needs: [build]
    run: echo published
  report:
    needs: [{job: build, when: always}]
    run: echo "report ran"
`

// newRepo creates a git repo with the given workflow files, compiles the
// lock with the real binary and commits everything.
func newRepo(t *testing.T, bin string, files map[string]string) string {
	t.Helper()
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	for name, src := range files {
		p := filepath.Join(repo, ".kici", "workflows", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := runKici(t, bin, repo, "compile"); code != 0 {
		t.Fatalf("compile: %s", stderr)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "init")
	return repo
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPreview: `kici preview --json` prints exactly {workflows:[decision]}
// with the item-3 shape, and the decisions equal what the orchestrator's
// matcher returns for the same lock and normalized event.
func TestPreview(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"ci.yaml": authorWorkflows, "nightly.yaml": failingWorkflow})
	lockBytes, err := os.ReadFile(filepath.Join(repo, ".kici", "kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	lf, err := lockfile.Parse(lockBytes)
	if err != nil {
		t.Fatal(err)
	}

	out, stderr, code := runKici(t, bin, repo, "preview", "push", "--branch", "release/1.2", "--files", "src/a.go,README.md", "--json")
	if code != 0 {
		t.Fatalf("preview: %d %s", code, stderr)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil || !reflect.DeepEqual(keys(top), []string{"workflows"}) {
		t.Fatalf("top-level shape: %v %s", err, out)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(top["workflows"], &raw); err != nil || len(raw) != 2 {
		t.Fatalf("workflows: %v %s", err, out)
	}
	for _, d := range raw {
		if got := keys(d); !reflect.DeepEqual(got, []string{"checks", "matched", "matchedTrigger", "name", "summary"}) {
			t.Fatalf("decision keys %v", got)
		}
		var checks []map[string]json.RawMessage
		if err := json.Unmarshal(d["checks"], &checks); err != nil || len(checks) == 0 {
			t.Fatalf("checks: %v", err)
		}
		for _, c := range checks {
			if got := keys(c); !reflect.DeepEqual(got, []string{"check", "passed", "pattern", "reason", "value"}) {
				t.Fatalf("check keys %v", got)
			}
		}
	}
	var got PreviewOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := trigger.MatchAll(lf, &trigger.Event{Type: "push", TargetBranch: "release/1.2", ChangedFiles: []string{"src/a.go", "README.md"}, Provider: provider.Local})
	if !reflect.DeepEqual(got.Workflows, want) {
		t.Fatalf("preview differs from the matcher:\n%+v\n%+v", got.Workflows, want)
	}
	if !got.Workflows[0].Matched || got.Workflows[1].Matched || got.Workflows[1].MatchedTrigger != nil {
		t.Fatalf("decisions: %+v", got.Workflows)
	}

	// Without --branch a push is of the checked-out branch (main here).
	out, stderr, code = runKici(t, bin, repo, "preview", "push", "--json")
	if code != 0 {
		t.Fatalf("preview without --branch: %d %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if want := trigger.MatchAll(lf, &trigger.Event{Type: "push", TargetBranch: "main", Provider: provider.Local}); !reflect.DeepEqual(got.Workflows, want) {
		t.Fatalf("push without --branch should be a push of main:\n%+v\nwant %+v", got.Workflows, want)
	}

	// A real GitHub delivery goes through the GitHub normalizer.
	fixture := filepath.Join(fixtureDir(t), "pull_request.opened.1.json")
	out, stderr, code = runKici(t, bin, repo, "preview", "--payload", fixture, "--event", "pull_request", "--json")
	if code != 0 {
		t.Fatalf("preview payload: %d %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(fixture)
	ev, _, err := github.Normalize("pull_request", body)
	if err != nil {
		t.Fatal(err)
	}
	if want := trigger.MatchAll(lf, ev); !reflect.DeepEqual(got.Workflows, want) || !got.Workflows[0].Matched || *got.Workflows[0].MatchedTrigger != 1 {
		t.Fatalf("payload preview:\n%+v\nwant %+v", got.Workflows, want)
	}

	// Text output names the failing check.
	out, _, code = runKici(t, bin, repo, "preview", "pr", "--action", "closed", "--target-branch", "main")
	if code != 0 || !strings.Contains(out, "SKIP ci: No triggers matched") || !strings.Contains(out, "[FAIL] action: closed vs opened|synchronize") {
		t.Fatalf("text preview (%d):\n%s", code, out)
	}
	// Unsupported GitHub events and mismatched types are clear errors.
	_, stderr, code = runKici(t, bin, repo, "preview", "--payload", filepath.Join(fixtureDir(t), "issues.opened.1.json"), "--event", "issues")
	if code != 1 || !strings.Contains(stderr, "unsupported event") {
		t.Fatalf("unsupported: %d %s", code, stderr)
	}
	_, stderr, code = runKici(t, bin, repo, "preview", "push", "--payload", fixture, "--event", "pull_request")
	if code != 1 || !strings.Contains(stderr, `normalizes to event type "pull_request"`) {
		t.Fatalf("type mismatch: %d %s", code, stderr)
	}
	_, stderr, code = runKici(t, bin, t.TempDir(), "preview", "push", "--lock", filepath.Join(repo, "nope.json"))
	if code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("missing lock: %d %s", code, stderr)
	}
}

func fixtureDir(t *testing.T) string {
	d, err := filepath.Abs(fixtures.GitHubWebhooksDir())
	if err != nil {
		t.Fatal(err)
	}
	if env := os.Getenv("KICI_GITHUB_FIXTURES"); env != "" {
		d = env
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("fixtures: %v", err)
	}
	return d
}

// TestRunLocal runs matched jobs through the agent's runner: needs order,
// matrix legs, skip propagation and the exit code.
func TestRunLocal(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"ci.yaml": authorWorkflows, "nightly.yaml": failingWorkflow})

	out, stderr, code := runKici(t, bin, repo, "run", "local", "push", "--branch", "main", "--files", "src/x.go")
	if code != 0 {
		t.Fatalf("push run: %d\n%s\n%s", code, out, stderr)
	}
	lint := strings.Index(out, "lint on refs/heads/main")
	t1, t2 := strings.Index(out, "test go=1.25"), strings.Index(out, "test go=1.26")
	if lint < 0 || t1 < lint || t2 < lint || !strings.Contains(out, "skip workflow nightly") || !strings.Contains(out, "all jobs succeeded") {
		t.Fatalf("push run output:\n%s", out)
	}

	out, stderr, code = runKici(t, bin, repo, "run", "local", "tag", "--tag", "v1.0.0")
	if code != 1 || !strings.Contains(stderr, "1 job(s) did not succeed") {
		t.Fatalf("tag run: %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(out, "published") || !strings.Contains(out, "upstream_unmet: build (failed)") || !strings.Contains(out, "report ran") {
		t.Fatalf("skip propagation / always edge:\n%s", out)
	}

	_, stderr, code = runKici(t, bin, repo, "run", "local", "push", "--branch", "feature/x")
	if code != 2 || !strings.Contains(stderr, "no workflow matched") {
		t.Fatalf("no match: %d %s", code, stderr)
	}
}

// TestHookInstall: the hook compiles and stages the lock on commit, aborts
// a commit with a broken workflow, and never silently replaces a foreign
// hook.
func TestHookInstall(t *testing.T) {
	bin := sharedKici(t)
	repo := newRepo(t, bin, map[string]string{"ci.yaml": authorWorkflows})
	hookPath := filepath.Join(repo, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hookPath, []byte("#!/bin/sh\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runKici(t, bin, repo, "hook", "install")
	if code != 1 || !strings.Contains(stderr, "not written by kici") {
		t.Fatalf("foreign hook: %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(hookPath); string(b) != "#!/bin/sh\necho mine\n" {
		t.Fatalf("foreign hook was changed: %s", b)
	}
	if out, stderr, code := runKici(t, bin, repo, "hook", "install", "--force"); code != 0 || !strings.Contains(out, "installed") {
		t.Fatalf("force: %d %s", code, stderr)
	}
	if _, stderr, code := runKici(t, bin, repo, "hook", "install"); code != 0 {
		t.Fatalf("re-install over our own hook: %s", stderr)
	}
	if fi, err := os.Stat(hookPath); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("hook not executable: %v", err)
	}

	commit := func(msg string) (string, error) {
		cmd := exec.Command("git", "-C", repo, "commit", "-q", "-m", msg)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	wfPath := filepath.Join(repo, ".kici", "workflows", "ci.yaml")
	if err := os.WriteFile(wfPath, []byte(strings.Replace(authorWorkflows, "name: ci", "name: ci2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", repo, "add", ".kici/workflows/ci.yaml").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := commit("rename workflow"); err != nil {
		t.Fatalf("commit with hook: %v\n%s", err, out)
	}
	files, _ := exec.Command("git", "-C", repo, "show", "--name-only", "--format=", "HEAD").Output()
	if !strings.Contains(string(files), ".kici/kici.lock.json") {
		t.Fatalf("the hook did not stage the lock: %s", files)
	}
	lock, _ := exec.Command("git", "-C", repo, "show", "HEAD:.kici/kici.lock.json").Output()
	if !strings.Contains(string(lock), `"name": "ci2"`) {
		t.Fatalf("committed lock is stale")
	}
	// A broken workflow aborts the commit.
	if err := os.WriteFile(wfPath, []byte("name: x\non: {push: {branches: [{regex: \"(?=x)\"}]}}\njobs: {a: {run: \"true\"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", repo, "add", "-A").Run(); err != nil {
		t.Fatal(err)
	}
	if out, err := commit("broken"); err == nil || !strings.Contains(out, "lookahead") || !strings.Contains(out, "commit aborted") {
		t.Fatalf("broken workflow commit: %v\n%s", err, out)
	}
}

// TestInitHook: `kici init --hook` scaffolds the workflow and the hook.
func TestInitHook(t *testing.T) {
	bin := sharedKici(t)
	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, stderr, code := runKici(t, bin, repo, "init", "--hook")
	if code != 0 || !strings.Contains(out, "installed") {
		t.Fatalf("init --hook: %d %s %s", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(repo, ".git", "hooks", "pre-commit"))
	if err != nil || !strings.Contains(string(b), hookMarker) {
		t.Fatalf("hook: %v %s", err, b)
	}
	if _, err := os.Stat(filepath.Join(repo, ".kici", "workflows", "ci.yaml")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runKici(t, bin, t.TempDir(), "init", "--hook")
	if code != 1 || !strings.Contains(stderr, "not inside a git repository") {
		t.Fatalf("init --hook outside git: %d %s", code, stderr)
	}
}
