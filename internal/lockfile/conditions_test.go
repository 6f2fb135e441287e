package lockfile

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileConditionsAndOutputs(t *testing.T) {
	src := `on:
  dispatch:
    inputs:
      target: {type: enum, values: [staging, prod], default: staging}
jobs:
  build:
    outputs: {version: meta.version}
    steps:
      - name: meta
        run: echo "version=1.2.3" >> "$KICI_OUTPUT"
      - name: only-on-tags
        if: event.tag != "" && steps.meta.outcome == "success"
        run: echo tagged
  deploy:
    needs: [build]
    if: needs.build.outputs.version startsWith "1." && inputs.target == "prod"
    env:
      VERSION: "v${{ needs.build.outputs.version }}"
    run: ./deploy "$VERSION"
`
	lf, err := compileOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	b, d := lf.Workflows[0].Jobs[0], lf.Workflows[0].Jobs[1]
	if b.Outputs["version"] != "meta.version" || !b.Steps[0].HasOutputs || b.Steps[1].HasOutputs {
		t.Fatalf("build outputs = %v, hasOutputs = %v/%v", b.Outputs, b.Steps[0].HasOutputs, b.Steps[1].HasOutputs)
	}
	if b.Steps[1].If != `event.tag != "" && steps.meta.outcome == "success"` {
		t.Fatalf("step if = %q", b.Steps[1].If)
	}
	if !strings.HasPrefix(d.If, "needs.build.outputs.version") || d.Env["VERSION"] != "v${{ needs.build.outputs.version }}" {
		t.Fatalf("deploy = if %q env %v", d.If, d.Env)
	}
}

func TestCompileConditionErrors(t *testing.T) {
	const head = "name: ci\non: push\njobs:\n"
	cases := []struct{ name, src, want string }{
		{"not boolean", head + "  a:\n    if: event.branch\n    run: x\n", `ci.yaml:5:9: if: expected bool`},
		{"type mismatch", head + "  a:\n    if: event.branch == 1\n    run: x\n", `ci.yaml:5:`},
		{"unknown name", head + "  a:\n    if: evnt.branch == \"main\"\n    run: x\n", `ci.yaml:5:9: if: unknown name evnt`},
		{"syntax", head + "  a:\n    if: \"event.branch == \"\n    run: x\n", `ci.yaml:5:`},
		{"need not declared", head + "  a: {run: x}\n  b:\n    if: needs.a.result == \"success\"\n    run: x\n", `ci.yaml:6:9: if: needs.a: "a" is not in this job's needs`},
		{"undeclared input", head + "  a:\n    if: inputs.target == \"prod\"\n    run: x\n", `"target" is not an input`},
		{"unknown matrix dim", head + "  a:\n    matrix: {os: [linux]}\n    if: matrix.oss == \"linux\"\n    run: x\n", `"oss" is not a matrix dimension`},
		{"steps in job if", head + "  a:\n    if: steps.x.outcome == \"success\"\n    run: x\n", `unknown name steps`},
		{"later step", head + "  a:\n    steps:\n      - {name: one, if: steps.two.outcome == \"success\", run: x}\n      - {name: two, run: y}\n", `"two" is not an earlier step`},
		{"template in run", head + "  a:\n    run: echo ${{ event.branch }}\n", "${{ … }} is not expanded in `run:`"},
		{"bad env template", head + "  a:\n    env: {X: \"${{ needs.b.outputs.v }}\"}\n    run: x\n", `env X: needs.b: "b" is not in this job's needs`},
		{"unclosed template", head + "  a:\n    env: {X: \"${{ event.ref \"}\n    run: x\n", `unclosed ${{`},
		{"output of unknown step", head + "  a:\n    outputs: {v: nope.v}\n    run: x\n", `names step "nope", which is not a step of this job`},
		{"output without key", head + "  a:\n    outputs: {v: step-1}\n    run: x\n", `must be <step>.<key>`},
		{"bad drift", "drift: maybe\njobs:\n  a: {run: x}\n", `drift must be fail or warn`},
		{"undeclared output", head + "  a:\n    outputs: {version: step-1.version}\n    run: x\n  b:\n    needs: [a]\n    if: needs.a.outputs.verison != \"\"\n    run: x\n", `ci.yaml:7:3: job "b" uses needs.a.outputs.verison, but job "a" declares no output "verison" (declared: version)`},
		{"input compared with the wrong type", "name: ci\non:\n  push: {}\n  dispatch:\n    inputs:\n      repeat: {type: integer, default: 1}\njobs:\n  a:\n    steps:\n      - {name: s, if: 'inputs.repeat > \"2\"', run: x}\n",
			`mismatched types float64 and string`},
		{"hyphenated step name", head + "  a:\n    steps:\n      - {name: cross-build, run: x}\n      - {name: b, if: steps.cross-build.outcome == \"success\", run: y}\n",
			`if: steps.cross-build reads as "steps.cross - build" (a subtraction): write steps["cross-build"] for a name with "-"`},
		{"typo gets a suggestion", head + "  a:\n    if: evnet.branch == \"main\"\n    run: x\n", `unknown name evnet; did you mean "event"?`},
		{"steps in job env", head + "  a:\n    env: {X: \"${{ steps.meta.outputs.v }}\"}\n    steps:\n      - {name: meta, run: x}\n", `unknown name steps`},
		{"later step in step env", head + "  a:\n    steps:\n      - {name: one, env: {V: \"${{ steps.two.outputs.v }}\"}, run: x}\n      - {name: two, run: y}\n", `"two" is not an earlier step`},
		{"undeclared output in env", head + "  a: {run: x}\n  b:\n    needs: [a]\n    env: {V: \"${{ needs.a.outputs.v }}\"}\n    run: x\n", `declares no output "v"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileOne(t, c.src)
			var ces CompileErrors
			if !errors.As(err, &ces) {
				t.Fatalf("error %T is not CompileErrors: %v", err, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant containing %q", err, c.want)
			}
		})
	}
}

func TestCompileAuthoringPolish(t *testing.T) {
	const head = "name: ci\non: push\njobs:\n"
	errCases := []struct{ name, src, want string }{
		{"did you mean runsOn", head + "  a:\n    runs-on: x\n    run: x\n", `unknown key "runs-on" in job a; did you mean "runsOn"?`},
		{"did you mean needs", head + "  a:\n    neds: [b]\n    run: x\n", `did you mean "needs"?`},
		{"unclosed class", "on:\n  push:\n    branches: [\"release/[a-\"]\njobs:\n  a: {run: x}\n", `ci.yaml:3:25: push.branches: invalid glob "release/[a-": unclosed character class`},
		{"unclosed brace", "on:\n  push:\n    paths: [\"src/{a,b\"]\njobs:\n  a: {run: x}\n", `ci.yaml:3:18: push.paths: invalid glob "src/{a,b": unclosed brace`},
		{"reversed range", "on:\n  tag:\n    patterns: [\"v[9-0]\"]\njobs:\n  a: {run: x}\n", `range "9-0" is reversed`},
		{"bad regex", "on:\n  push:\n    branches: [{regex: \"a(\"}]\njobs:\n  a: {run: x}\n", `missing closing )`},
	}
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileOne(t, c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant containing %q", err, c.want)
			}
		})
	}
	t.Run("merge keys", func(t *testing.T) {
		src := `on: push
defaults: &defaults
  runsOn: kici:os:linux
  timeout: 10m
jobs:
  a:
    <<: *defaults
    timeout: 5m
    run: x
`
		// defaults is not a workflow key: merge sources live under jobs.
		if _, err := compileOne(t, src); err == nil || !strings.Contains(err.Error(), `unknown key "defaults"`) {
			t.Fatalf("err = %v", err)
		}
		src = `on: push
jobs:
  base: &base
    runsOn: kici:os:linux
    timeout: 10m
    env: {A: "1"}
    run: x
  a:
    <<: [*base]
    timeout: 5m
    run: y
`
		lf, err := compileOne(t, src)
		if err != nil {
			t.Fatal(err)
		}
		a := lf.Workflows[0].Jobs[1]
		if a.Timeout != 300000 || a.Env["A"] != "1" || len(a.RunsOn) != 1 || a.RunsOn[0].Value != "kici:os:linux" || a.Steps[0].Run != "y" {
			t.Fatalf("merged job = %+v", a)
		}
	})
}

// A step's env reads earlier steps' outputs, a step condition reads the
// job's env and typed inputs.
func TestCompileStepScope(t *testing.T) {
	src := `on:
  push: {branches: [main]}
  dispatch:
    inputs:
      repeat: {type: integer, default: 1}
jobs:
  build:
    env: {DEPLOY: "yes"}
    steps:
      - name: meta
        run: echo "version=1.2.3" >> "$KICI_OUTPUT"
      - name: show
        env:
          VERSION: "v${{ steps.meta.outputs.version }}"
        run: echo "$VERSION"
      - name: repeated
        if: inputs.repeat > 2 && env.DEPLOY == "yes"
        run: echo again
`
	lf, err := compileOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := lf.Workflows[0].Jobs[0].Steps[1].Env["VERSION"]; got != "v${{ steps.meta.outputs.version }}" {
		t.Errorf("step env = %q", got)
	}
}
