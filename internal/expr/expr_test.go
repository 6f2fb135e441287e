package expr

import (
	"strings"
	"testing"
	"time"
)

func TestEvalJobCondition(t *testing.T) {
	env := Env{
		Event:  Event{Type: "push", Branch: "main", ChangedPaths: []string{"docs/a.md", "go.mod"}},
		Inputs: map[string]any{"dry": true, "count": 3.0},
		Needs:  map[string]Need{"build": {Result: "success", Outputs: map[string]string{"version": "1.2.3"}}},
	}
	sc := Scope{Needs: []string{"build"}, Inputs: []string{"dry", "count"}}
	cases := map[string]bool{
		`event.branch == "main" && needs.build.result == "success"`: true,
		`needs.build.outputs.version startsWith "2."`:               false,
		`any(event.changedPaths, glob("docs/**", #))`:               true,
		`inputs.dry == true && inputs.count > 2`:                    true,
		`needs.build.outputs.missing == ""`:                         true,
		`event.type in ["pull_request", "tag"] || event.tag != ""`:  false,
		`all(event.changedPaths, {not glob("src/**", #)})`:          true,
		`matrix.os == "" `: true,
	}
	for src, want := range cases {
		sc := sc
		if strings.Contains(src, "matrix") {
			sc.Matrix = []string{"os"}
		}
		p, err := Compile(src, sc)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := p.Eval(env)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", src, got, err, want)
		}
	}
}

func TestCompileErrorPositions(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msgPrefix string
	}{
		{`event.branch`, 1, 1, "expected bool"},
		{`event.nope == "x"`, 1, 7, "type"},
		{`needs.x.result == "success"`, 1, 1, `needs.x: "x" is not in this job's needs`},
		{"event.branch == \"main\" &&\n  bogus", 2, 3, "unknown name bogus"},
	}
	for _, c := range cases {
		_, err := Compile(c.src, Scope{})
		e, ok := err.(*Error)
		if !ok {
			t.Fatalf("%q: err = %v", c.src, err)
		}
		if e.Line != c.line || e.Column != c.col || !strings.Contains(e.Msg, c.msgPrefix) {
			t.Errorf("%q: %d:%d %s; want %d:%d %s", c.src, e.Line, e.Column, e.Msg, c.line, c.col, c.msgPrefix)
		}
	}
}

func TestInterpolate(t *testing.T) {
	env := Env{Event: Event{Branch: "feat/$(rm -rf /)"}, Needs: map[string]Need{"a": {Outputs: map[string]string{"v": "7"}}}}
	got, err := Interpolate("v${{ needs.a.outputs.v }}-${{event.branch}}", env)
	if err != nil || got != "v7-feat/$(rm -rf /)" {
		t.Fatalf("got %q, %v", got, err)
	}
	if err := CheckTemplate("x ${{ needs.b.outputs.v }}", Scope{Needs: []string{"a"}}); err == nil || err.(*Error).Column != 7 {
		t.Fatalf("CheckTemplate error = %v", err)
	}
	if _, err := Parts("${{ open"); err == nil {
		t.Fatal("unclosed template accepted")
	}
}

func TestStepCondition(t *testing.T) {
	env := StepEnv{Env: Env{Event: Event{Branch: "main"}}, Steps: map[string]Step{"meta": {Outcome: "success", Outputs: map[string]string{"v": "2"}}}}
	p, err := Compile(`steps.meta.outcome == "success" && steps.meta.outputs.v == "2" && event.branch == "main"`, Scope{Step: true, Steps: []string{"meta"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Eval(env); !ok || err != nil {
		t.Fatalf("= %v, %v", ok, err)
	}
}

// TestResourceBounds: a condition cannot make the orchestrator build huge
// values or spin (expr's memory budget), and an oversized condition is
// refused before parsing.
func TestResourceBounds(t *testing.T) {
	for _, src := range []string{
		`len(1..100000000) > 0`,
		`len(map(1..10000000, {# * 2})) > 0`,
	} {
		done := make(chan error, 1)
		go func() {
			_, err := EvalString(src, Env{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: evaluated without hitting the memory budget", src)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still running after 10s", src)
		}
	}
	if _, err := Compile(strings.Repeat("true && ", MaxSourceLen/8+1)+"true", Scope{}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized condition: %v", err)
	}
}

// Conditions are type-checked against the declared input types.
func TestTypedInputs(t *testing.T) {
	sc := Scope{Step: true, Inputs: []string{"repeat", "dry", "target"},
		InputTypes: map[string]string{"repeat": "integer", "dry": "boolean", "target": "enum"}}
	for _, src := range []string{`inputs.repeat > 2`, `inputs.dry && inputs.target == "prod"`, `inputs.repeat + 1 == 2`} {
		p, err := Compile(src, sc)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if _, err := p.Eval(StepEnv{Env: Env{Inputs: map[string]any{"repeat": 1.0, "dry": true, "target": "prod"}}}); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	for src, want := range map[string]string{
		`inputs.repeat > "2"`:          "mismatched types float64 and string",
		`inputs.dry == "true"`:         "mismatched types bool and string",
		`inputs.target > 3`:            "mismatched types string and int",
		`inputs.repeat startsWith "1"`: "mismatched types float64 and string",
	} {
		_, err := Compile(src, sc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// Hints: the index form for a hyphenated name, the closest name for a typo.
func TestCompileHints(t *testing.T) {
	sc := Scope{Step: true, Steps: []string{"cross-build", "build"}, Needs: []string{"lint"}}
	for src, want := range map[string]string{
		`steps.cross-build.outcome == "success"`: `write steps["cross-build"] for a name with "-"`,
		`evnet.branch == "main"`:                 `unknown name evnet; did you mean "event"?`,
		`event.brnach == "main"`:                 `did you mean "branch"?`,
		`steps.biuld.outcome == "success"`:       `"biuld" is not an earlier step of this job; did you mean "build"?`,
		`steps.cross-biuld.outcome == "x"`:       `write steps["cross-biuld"] for a name with "-"; did you mean "cross-build"?`,
		`needs.lnit.result == "success"`:         `did you mean "lint"?`,
		`steps.build.outcom == "success"`:        `did you mean "outcome"?`,
	} {
		_, err := Compile(src, sc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	if _, err := Compile(`steps["cross-build"].outcome == "success"`, sc); err != nil {
		t.Errorf("index form: %v", err)
	}
	if _, err := Compile(`zzz == 1`, sc); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name close to nothing gets no suggestion: %v", err)
	}
}

// A step condition reads the job's environment as env.
func TestStepConditionEnv(t *testing.T) {
	p, err := Compile(`env.DEPLOY == "yes" && env.MISSING == ""`, Scope{Step: true})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Eval(StepEnv{JobEnv: map[string]string{"DEPLOY": "yes"}}); !ok || err != nil {
		t.Errorf("= %v, %v", ok, err)
	}
	if _, err := Compile(`env.DEPLOY == "yes"`, Scope{}); err == nil {
		t.Error("env in a job condition compiled")
	}
	got, err := Interpolate(`v${{ steps.meta.outputs.version }}-${{ env.K }}`, StepEnv{JobEnv: map[string]string{"K": "k"},
		Steps: map[string]Step{"meta": {Outputs: map[string]string{"version": "3.1"}}}})
	if err != nil || got != "v3.1-k" {
		t.Errorf("Interpolate = %q, %v", got, err)
	}
	for s, want := range map[string]bool{"${{ steps.meta.outputs.v }}": true, "${{ env.X }}": true, "${{ needs.a.outputs.v }}": false, "plain": false} {
		if UsesStepScope(s) != want {
			t.Errorf("UsesStepScope(%q) != %v", s, want)
		}
	}
}
