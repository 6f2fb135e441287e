package lockfile

import (
	"strings"
	"testing"
)

const gatesYAML = `name: gated
on:
  push:
    branches: [main]
    skipCi: false
    commitMessage:
      contains: deploy
      notContains: [wip, draft]
      matches: '^(feat|fix)'
      notMatches: {regex: 'revert', flags: i}
    requires:
      - package.json
      - file: package.json
        match: {"$.private": true}
      - file: VERSION
        matches: '^2\.'
      - file: deploy.yml
        match: {"$.enabled": true}
jobs:
  a:
    run: "true"
`

// TestGatesCompileAndReload compiles every gate key, checks the lock
// entries and reloads the encoded lock with Parse (lock registration).
func TestGatesCompileAndReload(t *testing.T) {
	lf, err := compileOne(t, gatesYAML)
	if err != nil {
		t.Fatal(err)
	}
	tr := lf.Workflows[0].Triggers[0]
	if tr.SkipCI == nil || *tr.SkipCI {
		t.Fatalf("skipCi = %v, want false", tr.SkipCI)
	}
	c := tr.CommitMessage
	if c == nil || c.Contains[0] != "deploy" || len(c.NotContains) != 2 || c.Matches[0].Pattern != "^(feat|fix)" || c.NotMatches[0].Flags != "i" {
		t.Fatalf("commitMessage = %+v", c)
	}
	if len(tr.Requires) != 4 {
		t.Fatalf("requires = %+v", tr.Requires)
	}
	for i, want := range []RequireFormat{RequireJSON, RequireJSON, RequireText, RequireYAML} {
		if tr.Requires[i].Format != want {
			t.Errorf("requires[%d].format = %q, want %q", i, tr.Requires[i].Format, want)
		}
	}
	data, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if back.Workflows[0].Triggers[0].Requires[2].Matches.Pattern != `^2\.` {
		t.Fatalf("reloaded requires = %+v", back.Workflows[0].Triggers[0].Requires)
	}
}

// TestGatesRejectBadInput checks each refusal names the key, line and
// column, and that nested quantifiers are refused at compile.
func TestGatesRejectBadInput(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"nested quantifier", "commitMessage: {matches: '(a+)+$'}", "ci.yaml:4:30: push.commitMessage.matches: regex /(a+)+$/ is ReDoS-prone: nested repetition"},
		{"too long", "commitMessage: {matches: '" + strings.Repeat("a", MaxGatePatternLen+1) + "'}", "regex is 513 bytes long; the limit is 512"},
		{"empty gate", "commitMessage: {}", "needs at least one of contains, notContains, matches, notMatches"},
		{"unknown key", "commitMessage: {startsWith: x}", "startsWith"},
		{"escaping path", "requires: ['../secret']", "must be a clean relative path"},
		{"absolute path", "requires: ['/etc/passwd']", "must be a relative path"},
		{"match on text", "requires: [{file: VERSION, match: {$.a: 1}}]", "needs format json or yaml"},
		{"contains on json", "requires: [{file: a.json, contains: x}]", "contains/matches apply to text files"},
		{"bad format", "requires: [{file: a, format: toml}]", `format "toml" is not json, yaml or text`},
		{"branch regex nested", "branches: [{regex: '(x*)*'}]", "nested repetition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: g\non:\n  push:\n    " + tc.body + "\njobs:\n  a:\n    run: \"true\"\n"
			_, err := compileOne(t, src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestGatesCheckedAtLoad: a hand-edited lock with a nested-quantifier
// commit-message regex, or a requires path leaving the repository, is
// refused when the lock is loaded (as at registration).
func TestGatesCheckedAtLoad(t *testing.T) {
	lf, err := compileOne(t, gatesYAML)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Trigger){
		"regex": func(tr *Trigger) { tr.CommitMessage.Matches[0].Pattern = "(a|aa)+(b+)+" },
		"path":  func(tr *Trigger) { tr.Requires[0].File = "a/../../etc/passwd" },
		"branch": func(tr *Trigger) {
			tr.Branches = []Pattern{{Type: PatternRegex, Pattern: "(a*)*"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cp, _ := compileOne(t, gatesYAML)
			edit(&cp.Workflows[0].Triggers[0])
			data, err := Encode(cp)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data); err == nil {
				t.Fatal("Parse accepted the edited lock")
			}
		})
	}
	_ = lf
}
