package lockfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const contextsBase = `name: deploy
on: {push: {branches: [main]}}
jobs:
  ship:
    runsOn: kici:os:linux
    contexts: [release, "deploy-*", a.b_c-1?]
    run: make ship
  one:
    contexts: release
    run: make one
  none:
    run: make none
`

func TestCompileJobContexts(t *testing.T) {
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/deploy.yaml", Source: []byte(contextsBase)}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := lf.Workflows[0].Jobs
	if !reflect.DeepEqual(jobs[0].Contexts, []string{"release", "deploy-*", "a.b_c-1?"}) {
		t.Errorf("ship contexts = %q", jobs[0].Contexts)
	}
	if !reflect.DeepEqual(jobs[1].Contexts, []string{"release"}) {
		t.Errorf("single-string contexts = %q", jobs[1].Contexts)
	}
	if jobs[2].Contexts != nil {
		t.Errorf("none contexts = %q", jobs[2].Contexts)
	}
	// The lock carries them, omits them when absent, and reads them back.
	data, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"contexts": [`) || strings.Count(string(data), `"contexts"`) != 2 {
		t.Fatalf("lock contexts:\n%s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Workflows[0].Jobs[0].Contexts, jobs[0].Contexts) {
		t.Errorf("round trip = %q", back.Workflows[0].Jobs[0].Contexts)
	}
}

func TestCompileRejectsBadJobContexts(t *testing.T) {
	long := strings.Repeat("x", 129)
	cases := []struct{ bad, want string }{
		{`contexts: [""]`, `deploy.yaml:6:16: job ship contexts: context name "" must not be empty`},
		{`contexts: [release, release]`, `deploy.yaml:6:25: job ship contexts: context "release" is listed twice`},
		{`contexts: ["rel ease"]`, `deploy.yaml:6:16: job ship contexts: context name "rel ease" may only contain letters, digits`},
		{`contexts: ["team/prod"]`, `context name "team/prod" may only contain`},
		{`contexts: ["{a,b}"]`, `context name "{a,b}" may only contain`},
		{`contexts: [` + long + `]`, `is 129 characters long (maximum 128)`},
		{`contexts: {a: b}`, `deploy.yaml:6:15: job ship contexts must be a list, got a mapping`},
		{`contexts: [[a]]`, `job ship contexts entries must be a string, got a list`},
		{`contexts: [a, "b c", a]`, `context "a" is listed twice`},
	}
	for _, c := range cases {
		src := strings.Replace(contextsBase, `contexts: [release, "deploy-*", a.b_c-1?]`, c.bad, 1)
		if src == contextsBase {
			t.Fatal("replacement did not apply")
		}
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/deploy.yaml", Source: []byte(src)}})
		var ces CompileErrors
		if !errors.As(err, &ces) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want containing %q", c.bad, err, c.want)
		}
	}
	// Every bad entry is reported, each at its own position.
	src := strings.Replace(contextsBase, `contexts: [release, "deploy-*", a.b_c-1?]`, `contexts: [a, "b c", a]`, 1)
	_, err := Compile([]SourceFile{{Path: ".kici/workflows/deploy.yaml", Source: []byte(src)}})
	var ces CompileErrors
	if !errors.As(err, &ces) || len(ces) != 2 || ces[0].Column == ces[1].Column {
		t.Errorf("errors = %v", err)
	}
}

func TestParseRejectsBadJobContexts(t *testing.T) {
	cases := []struct {
		contexts []string
		want     string
	}{
		{[]string{""}, `workflow "deploy" job "ship" contexts[0]: context name "" must not be empty`},
		{[]string{"ok", "ok"}, `job "ship" contexts[1]: context "ok" is listed twice`},
		{[]string{"ok", "b@d"}, `contexts[1]: context name "b@d" may only contain`},
		{[]string{strings.Repeat("y", 200)}, `maximum 128`},
	}
	for _, c := range cases {
		lf, err := Compile([]SourceFile{{Path: ".kici/workflows/deploy.yaml", Source: []byte(contextsBase)}})
		if err != nil {
			t.Fatal(err)
		}
		lf.Workflows[0].Jobs[0].Contexts = c.contexts
		data, err := Encode(lf)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(data)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: Parse error = %v, want a ParseError containing %q", c.contexts, err, c.want)
		}
	}
	// The longest allowed name with wildcards loads.
	lf, _ := Compile([]SourceFile{{Path: ".kici/workflows/deploy.yaml", Source: []byte(contextsBase)}})
	lf.Workflows[0].Jobs[0].Contexts = []string{strings.Repeat("z", 127) + "*", "?"}
	data, _ := Encode(lf)
	if _, err := Parse(data); err != nil {
		t.Fatalf("valid contexts rejected: %v", err)
	}
}

func TestValidSecretRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"release:npm_token":                   true,
		"pg:team/prod:key.v2":                 true,
		"release/../other:key":                false,
		"./release:key":                       false,
		"release/.:key":                       false,
		"release:":                            false,
		":key":                                false,
		"release:key with space":              false,
		"vault:release:key":                   false,
		"team/..hidden/x:key":                 true, // "..hidden" is a name, not a parent segment
		"release:" + strings.Repeat("k", 255): true,
		"release:" + strings.Repeat("k", 256): false, // the key is 255 at most
		"pg:a:" + strings.Repeat("k", 255):    true,
	} {
		if got := ValidSecretRef(ref); got != want {
			t.Errorf("ValidSecretRef(%q) = %v, want %v", ref, got, want)
		}
	}
}
