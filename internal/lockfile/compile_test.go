package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

const fullExample = `name: ci
description: Build and test
on:
  push:
    branches: [main, "release/*", {regex: "^v\\d+$"}]
    paths: ["**/*.go", "!docs/**"]
  pull_request:
    targetBranches: [main]
timeout: 30m
concurrency: {group: "ci-${ref}", cancelInProgress: true}
env: {GOFLAGS: -mod=mod}
jobs:
  lint:
    runsOn: kici:os:linux
    run: go vet ./...
  test:
    runsOn: [kici:os:linux, "kici:host:box-*"]
    needs: [lint]
    matrix:
      node: ["20", "22"]
      db: [pg, mysql]
      exclude: [{node: "20", db: mysql}]
      include: [{node: "24", db: pg}]
    steps:
      - run: go test ./...
      - name: race
        run: go test -race ./...
        retry: 2
      - run: echo done
        timeout: 5m
  build:
    runsOn:
      labels: [kici:os:linux]
      exclude: [flaky]
      pick: any
    needs: [lint, {job: test, when: always}]
    env: {CGO_ENABLED: "0", GOFLAGS: ""}
    timeout: 10m
    gracePeriod: 10s
    checkout: false
    steps:
      - name: compile
        run: |
          go build ./... && echo "<done>"
        shell: bash
        workingDirectory: sub/dir
        continueOnError: true
        retry: {maxAttempts: 3, delay: 2s, backoff: fixed, maxDelay: 1m}
`

func compileOne(t *testing.T, src string) (*LockFile, error) {
	t.Helper()
	return Compile([]SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte(src)}})
}

func TestCompileFullExample(t *testing.T) {
	lf, err := compileOne(t, fullExample)
	if err != nil {
		t.Fatal(err)
	}
	wf := lf.Workflows[0]
	if wf.Name != "ci" || wf.Description != "Build and test" || wf.Timeout != 1800000 {
		t.Fatalf("workflow = %+v", wf)
	}
	if wf.ContentHash != WorkflowContentHash([]byte(fullExample)) || wf.CompileSchemaVersion != 5 {
		t.Fatalf("hash = %s", wf.ContentHash)
	}
	if lf.Source != (SourceRef{File: ".kici/workflows/ci.yaml", Export: "#default"}) {
		t.Fatalf("source = %+v", lf.Source)
	}
	if c := wf.Concurrency; c == nil || !c.HasGroup || c.Group != "ci-${ref}" || c.CancelInProgress == nil || !*c.CancelInProgress {
		t.Fatalf("concurrency = %+v", c)
	}
	wantTriggers := []Trigger{
		{Type: "push", Branches: []Pattern{{Type: PatternGlob, Pattern: "main"}, {Type: PatternGlob, Pattern: "release/*"}, {Type: PatternRegex, Pattern: `^v\d+$`}},
			Paths: []string{"**/*.go", "!docs/**"}},
		{Type: "pr", Events: DefaultPREvents, TargetBranches: []Pattern{{Type: PatternGlob, Pattern: "main"}}},
	}
	if !reflect.DeepEqual(wf.Triggers, wantTriggers) {
		t.Fatalf("triggers = %+v", wf.Triggers)
	}
	var names []string
	for _, j := range wf.Jobs {
		names = append(names, j.Name)
	}
	if !reflect.DeepEqual(names, []string{"lint", "test", "build"}) {
		t.Fatalf("job order = %v", names)
	}
	lint, test, build := wf.Jobs[0], wf.Jobs[1], wf.Jobs[2]
	if len(lint.Steps) != 1 || lint.Steps[0].Name != "step-1" || lint.Steps[0].Run != "go vet ./..." {
		t.Fatalf("lint steps = %+v", lint.Steps)
	}
	if !reflect.DeepEqual(lint.Env, map[string]string{"GOFLAGS": "-mod=mod"}) {
		t.Fatalf("lint env = %v", lint.Env)
	}
	if test.RunsOn[1].Kind != MatcherRegex || test.RunsOn[1].Source != `^(?:kici:host:box-[^/]*)$` {
		t.Fatalf("test runsOn = %+v", test.RunsOn)
	}
	var stepNames []string
	for _, s := range test.Steps {
		stepNames = append(stepNames, s.Name)
	}
	if !reflect.DeepEqual(stepNames, []string{"step-1", "race", "step-2"}) {
		t.Fatalf("step names = %v", stepNames)
	}
	if loc := test.Steps[1].SourceLocation; loc == nil || *loc != (Location{File: ".kici/workflows/ci.yaml", Line: 26, Column: 9}) {
		t.Fatalf("race location = %+v", loc)
	}
	if r := test.Steps[1].Retry; r == nil || *r != (Retry{MaxAttempts: 2, DelayMs: 1000, Backoff: "exponential", MaxDelayMs: 30000}) {
		t.Fatalf("retry = %+v", r)
	}
	if test.Steps[2].Timeout != 300000 {
		t.Fatalf("timeout = %d", test.Steps[2].Timeout)
	}
	legs, err := ExpandMatrix(&test)
	if err != nil {
		t.Fatal(err)
	}
	var legNames []string
	for _, l := range legs {
		legNames = append(legNames, l.Name)
	}
	if !reflect.DeepEqual(legNames, []string{"test (pg, 20)", "test (pg, 22)", "test (mysql, 22)", "test (24, pg)"}) {
		t.Fatalf("legs = %q", legNames)
	}
	if build.RunsOnPick != "any" || len(build.ExcludeLabels) != 1 || build.ExcludeLabels[0].Value != "flaky" {
		t.Fatalf("build runsOn = %+v", build)
	}
	wantNeeds := []Need{{Name: "lint", RunOn: []status.Job{status.JobSuccess}}, {Name: "test", RunOn: status.TerminalJobs()}}
	if !reflect.DeepEqual(build.Needs, wantNeeds) {
		t.Fatalf("needs = %+v", build.Needs)
	}
	if !reflect.DeepEqual(build.Env, map[string]string{"GOFLAGS": "", "CGO_ENABLED": "0"}) {
		t.Fatalf("build env = %v (job env must win over workflow env)", build.Env)
	}
	if build.Timeout != 600000 || build.GracePeriod != 10 || build.Checkout == nil || *build.Checkout {
		t.Fatalf("build = %+v", build)
	}
	s := build.Steps[0]
	if s.Run != "go build ./... && echo \"<done>\"\n" || s.Shell != "bash" || s.WorkingDirectory != "sub/dir" || !s.ContinueOnError {
		t.Fatalf("compile step = %+v", s)
	}
	if *s.Retry != (Retry{MaxAttempts: 3, DelayMs: 2000, Backoff: "fixed", MaxDelayMs: 60000}) {
		t.Fatalf("retry = %+v", s.Retry)
	}
}

func TestCompileTriggerForms(t *testing.T) {
	src := `on: [push, {tag: {patterns: ["v*"]}}, {pr: {events: [], repos: ["myorg/*", "!myorg/secret-*"]}}, {schedule: {cron: "0 3 * * 1", timezone: Europe/Berlin}}]
jobs:
  a: {run: "true"}
`
	lf, err := compileOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	wf := lf.Workflows[0]
	if wf.Name != "ci" {
		t.Fatalf("default name = %q, want file stem", wf.Name)
	}
	want := []Trigger{
		{Type: "push"},
		{Type: "tag", Patterns: []Pattern{{Type: PatternGlob, Pattern: "v*"}}},
		{Type: "pr", Repos: []Pattern{{Type: PatternGlob, Pattern: "myorg/*"}, {Type: PatternGlob, Pattern: "!myorg/secret-*"}}},
		{Type: "schedule", CronExpression: "0 3 * * 1", Timezone: "Europe/Berlin"},
	}
	if !reflect.DeepEqual(wf.Triggers, want) {
		t.Fatalf("triggers = %+v", wf.Triggers)
	}
	if len(wf.Jobs[0].RunsOn) != 0 || wf.Jobs[0].RunsOn == nil {
		t.Fatalf("runsOn = %#v, want empty non-nil", wf.Jobs[0].RunsOn)
	}
}

func TestCompileErrors(t *testing.T) {
	const head = "name: ci\non: push\njobs:\n"
	cases := []struct {
		name, src, want string
	}{
		{"syntax", "name: ci\njobs:\n  a:\n    run: [unclosed\n", ".kici/workflows/ci.yaml:4:"},
		{"tab indent", "name: ci\njobs:\n\ta: {}\n", ".kici/workflows/ci.yaml:"},
		{"unknown workflow key", "name: ci\nnmae: x\njobs:\n  a: {run: x}\n", `ci.yaml:2:1: unknown key "nmae" in workflow`},
		{"unknown job key", head + "  a:\n    runs-on: x\n    run: x\n", `ci.yaml:5:5: unknown key "runs-on" in job a`},
		{"unknown step key", head + "  a:\n    steps:\n      - run: x\n        cwd: y\n", `ci.yaml:7:9: unknown key "cwd" in step`},
		{"no jobs", "name: ci\n", "ci.yaml:1:1: workflow has no jobs"},
		{"empty steps", head + "  a:\n    steps: []\n", "ci.yaml:5:12: job a has an empty steps list"},
		{"no steps", head + "  a:\n    runsOn: x\n", "ci.yaml:4:3: job a has no steps"},
		{"step without run", head + "  a:\n    steps:\n      - name: x\n", "ci.yaml:6:9: job a step 1 has no `run` command"},
		{"duplicate step", head + "  a:\n    steps:\n      - {name: x, run: a}\n      - {name: x, run: b}\n", `duplicate step name "x"`},
		{"duplicate job", head + "  a: {run: x}\n  a: {run: y}\n", "ci.yaml:5:3"},
		{"missing need", head + "  a:\n    needs: [b]\n    run: x\n", `ci.yaml:5:13: job "a" needs "b", which is not a job of this workflow`},
		{"self need", head + "  a:\n    needs: a\n    run: x\n", `ci.yaml:5:12: job "a" needs itself`},
		{"cycle", head + "  a: {needs: [c], run: x}\n  b: {needs: [a], run: x}\n  c: {needs: [b], run: x}\n", "ci.yaml:4:3: jobs form a dependency cycle: a → c → b → a"},
		{"bad when", head + "  a: {run: x}\n  b: {needs: [{job: a, when: sometimes}], run: x}\n", `when must be on-success, always, on-failure, on-skip`},
		{"bad status", head + "  a: {run: x}\n  b: {needs: [{job: a, when: [success, done]}], run: x}\n", `"done" is not a terminal job status`},
		{"bad duration", head + "  a:\n    timeout: 10 minutes\n    run: x\n", `ci.yaml:5:14: job a timeout: invalid duration "10 minutes"`},
		{"negative duration", head + "  a:\n    timeout: -5s\n    run: x\n", "must be positive"},
		{"zero ms", head + "  a:\n    timeout: 0\n    run: x\n", "must be a positive duration"},
		{"empty label", head + "  a:\n    runsOn: [\"\"]\n    run: x\n", "ci.yaml:5:14: job a runsOn: labels must be non-empty"},
		{"lookahead label", head + "  a:\n    runsOn: [{regex: \"^(?!x)\"}]\n    run: x\n", "ci.yaml:5:14: job a runsOn: regex /^(?!x)/: lookahead assertions ((?!...) are not supported"},
		{"redos label", head + "  a:\n    runsOn: [{regex: \"(a+)+\"}]\n    run: x\n", "ReDoS-prone"},
		{"backref branch", "on:\n  push:\n    branches: [{regex: '(a)\\1'}]\njobs:\n  a: {run: x}\n", "ci.yaml:3:16: push.branches: regex /(a)\\1/: backreferences"},
		{"bad glob", "on:\n  push:\n    paths: [\"@(a|b\"]\njobs:\n  a: {run: x}\n", "ci.yaml:3:13: push.paths: invalid glob"},
		{"unknown trigger", "on:\n  pushh: {}\njobs:\n  a: {run: x}\n", `ci.yaml:2:3: unknown trigger kind "pushh"`},
		{"unknown trigger key", "on:\n  push: {branch: [main]}\njobs:\n  a: {run: x}\n", `unknown key "branch" in trigger push`},
		{"empty matrix", head + "  a:\n    matrix: {}\n    run: x\n", "ci.yaml:5:13: job a matrix: matrix expands to no legs"},
		{"empty dimension", head + "  a:\n    matrix: {os: []}\n    run: x\n", `dimension "os" has no values`},
		{"matrix too big", head + "  a:\n    matrix: {a: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17], b: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}\n    run: x\n", "272 legs (maximum 256)"},
		{"exclude unknown dim", head + "  a:\n    matrix: {os: [l], exclude: [{oss: l}]}\n    run: x\n", `"oss" is not a matrix dimension`},
		{"retry too many", head + "  a:\n    steps:\n      - run: x\n        retry: 11\n", "retry must be between 1 and 10, got 11"},
		{"retry zero attempts", head + "  a:\n    steps:\n      - run: x\n        retry: {maxAttempts: 0}\n", "maxAttempts must be between 1 and 10"},
		{"bad backoff", head + "  a:\n    steps:\n      - run: x\n        retry: {maxAttempts: 2, backoff: linear}\n", "backoff must be fixed or exponential"},
		{"bad env name", head + "  a:\n    env: {1X: y}\n    run: x\n", "not a valid environment variable name"},
		{"work dir escapes", head + "  a:\n    steps:\n      - run: x\n        workingDirectory: ../up\n", "must not leave the checkout"},
		{"reserved job name", head + "  __init__x: {run: x}\n", "reserved for internal jobs"},
		{"run and steps", head + "  a:\n    run: x\n    steps: [{run: y}]\n", "use either `steps` or the `run` shorthand"},
		{"two documents", "name: a\njobs: {a: {run: x}}\n---\nname: b\n", "one workflow per file"},
		{"webhook without events", "on: {webhook: {}}\njobs:\n  a: {run: x}\n", "trigger webhook needs a non-empty `events` list"},
		{"bad timezone", "on: {schedule: {cron: '* * * * *', timezone: Mars/Olympus}}\njobs:\n  a: {run: x}\n", `unknown time zone "Mars/Olympus"`},
		{"not a mapping", "- a\n- b\n", "ci.yaml:1:1: a workflow must be a mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileOne(t, c.src)
			if err == nil {
				t.Fatal("compile succeeded")
			}
			var ces CompileErrors
			if !errors.As(err, &ces) {
				t.Fatalf("error %T is not CompileErrors: %v", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant containing %q", err, c.want)
			}
			for _, ce := range ces {
				if ce.File != ".kici/workflows/ci.yaml" || ce.Line == 0 {
					t.Errorf("error without position: %v", ce)
				}
			}
		})
	}
}

func TestCompileDuplicateWorkflowNames(t *testing.T) {
	_, err := Compile([]SourceFile{
		{Path: ".kici/workflows/a.yaml", Source: []byte("name: ci\njobs: {a: {run: x}}\n")},
		{Path: ".kici/workflows/b.yaml", Source: []byte("jobs: {a: {run: x}}\nname: ci\n")},
	})
	if err == nil || err.Error() != `.kici/workflows/b.yaml:2:7: duplicate workflow name "ci" (also defined in .kici/workflows/a.yaml)` {
		t.Fatalf("err = %v", err)
	}
}

func TestCompileDirAndCheck(t *testing.T) {
	root := writeRepo(t, map[string]string{
		"b.yaml":      "name: second\njobs: {a: {run: x}}\n",
		"a.yaml":      "name: first\njobs: {a: {run: x}}\n",
		"notes.txt":   "ignored",
		".hidden.yml": "ignored: [",
	})
	if err := Check(root); !errors.Is(err, ErrMissing) {
		t.Fatalf("Check without lock = %v", err)
	}
	lf, changed, err := Write(root)
	if err != nil || !changed {
		t.Fatalf("Write = %v, %v", changed, err)
	}
	if lf.Workflows[0].Name != "first" || lf.Workflows[1].Name != "second" {
		t.Fatalf("order = %s, %s", lf.Workflows[0].Name, lf.Workflows[1].Name)
	}
	if err := Check(root); err != nil {
		t.Fatalf("Check fresh = %v", err)
	}
	if _, changed, _ := Write(root); changed {
		t.Fatal("second Write changed the file")
	}
	wfPath := filepath.Join(root, ".kici", "workflows", "a.yaml")
	if err := os.WriteFile(wfPath, []byte("name: first\njobs: {a: {run: y}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(root); !errors.Is(err, ErrStale) || err.Error() != "lock file is stale: run kici compile" {
		t.Fatalf("Check after edit = %v", err)
	}
	if err := os.WriteFile(wfPath, []byte("name: first\njobs: {a: {run: [}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ces CompileErrors
	if err := Check(root); !errors.As(err, &ces) || ces[0].File != ".kici/workflows/a.yaml" || ces[0].Line != 2 {
		t.Fatalf("Check broken = %v", err)
	}
	if _, _, err := CompileDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "kici init") {
		t.Fatalf("CompileDir without workflows = %v", err)
	}
}
