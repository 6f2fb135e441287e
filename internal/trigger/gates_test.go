package trigger

import (
	"fmt"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

type mapFiles map[string]string

func (m mapFiles) ReadFile(p string) ([]byte, error) {
	s, ok := m[p]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, ErrFileNotFound)
	}
	return []byte(s), nil
}

func gatedWorkflow(t *testing.T, trig string) *lockfile.Workflow {
	t.Helper()
	lf, err := lockfile.Compile([]lockfile.SourceFile{{Path: ".kici/workflows/g.yaml",
		Source: []byte("name: g\non:\n  push:\n" + trig + "jobs:\n  a:\n    run: \"true\"\n")}})
	if err != nil {
		t.Fatal(err)
	}
	return &lf.Workflows[0]
}

func pushWith(msg string, files mapFiles) *Event {
	ev := &Event{Type: "push", TargetBranch: "main", CommitMessage: msg}
	if files != nil {
		ev.Files = files
	}
	return ev
}

// TestSkipCIMarkerSkipsByDefault: `[skip ci]` and `[ci skip]` (any case,
// anywhere in the message) stop a push trigger; skipCi: false turns the
// rule off.
func TestSkipCIMarkerSkipsByDefault(t *testing.T) {
	wf := gatedWorkflow(t, "    branches: [main]\n")
	for msg, want := range map[string]bool{
		"fix: typo":                  true,
		"docs only [skip ci]":        false,
		"docs\n\nbody [CI SKIP] end": false,
		"skip ci without brackets":   true,
	} {
		d := MatchWorkflow(wf, pushWith(msg, nil))
		if d.Matched != want {
			t.Errorf("%q: matched = %v, want %v (%+v)", msg, d.Matched, want, d.Checks)
		}
	}
	off := gatedWorkflow(t, "    skipCi: false\n")
	if d := MatchWorkflow(off, pushWith("x [skip ci]", nil)); !d.Matched {
		t.Errorf("skipCi: false still skipped: %+v", d.Checks)
	}
}

// TestCommitMessageGate checks contains, notContains, matches and
// notMatches, and that the trace names the failing condition.
func TestCommitMessageGate(t *testing.T) {
	wf := gatedWorkflow(t, `    commitMessage:
      contains: deploy
      notContains: wip
      matches: '^(feat|fix)'
      notMatches: {regex: revert, flags: i}
`)
	for msg, fail := range map[string]string{
		"feat: deploy api":        "",
		"feat: api":               "commit message contains",
		"feat: deploy wip":        "commit message notContains",
		"chore: deploy":           "commit message matches",
		"fix: REVERT deploy fast": "commit message notMatches",
		"":                        "commit message contains",
	} {
		d := MatchWorkflow(wf, pushWith(msg, nil))
		if (fail == "") != d.Matched {
			t.Errorf("%q: matched = %v", msg, d.Matched)
			continue
		}
		if fail != "" {
			last := d.Checks[len(d.Checks)-1]
			if last.Check != fail || last.Passed {
				t.Errorf("%q: last check = %+v, want failing %q", msg, last, fail)
			}
		}
	}
}

// TestRequiresGate reads JSON, YAML and text files through the event's
// reader; a missing file, an unparsable document or no reader fail.
func TestRequiresGate(t *testing.T) {
	wf := gatedWorkflow(t, `    requires:
      - file: package.json
        match: {"$.scripts.test": "/jest/"}
      - file: .kici/deploy.yaml
        match: {"$.enabled": true}
      - file: VERSION
        matches: '^2\.'
`)
	good := mapFiles{"package.json": `{"scripts":{"test":"jest --ci"}}`, ".kici/deploy.yaml": "enabled: true\n", "VERSION": "2.4.1\n"}
	if d := MatchWorkflow(wf, pushWith("x", good)); !d.Matched {
		t.Fatalf("good files did not match: %+v", d.Checks)
	}
	for name, tc := range map[string]struct {
		files  mapFiles
		reason string
	}{
		"json value":   {mapFiles{"package.json": `{"scripts":{"test":"mocha"}}`, ".kici/deploy.yaml": "enabled: true", "VERSION": "2.0"}, "no node equals"},
		"yaml value":   {mapFiles{"package.json": `{"scripts":{"test":"jest"}}`, ".kici/deploy.yaml": "enabled: false", "VERSION": "2.0"}, "no node equals"},
		"text":         {mapFiles{"package.json": `{"scripts":{"test":"jest"}}`, ".kici/deploy.yaml": "enabled: true", "VERSION": "1.9"}, "file does not match"},
		"missing file": {mapFiles{"package.json": `{"scripts":{"test":"jest"}}`, "VERSION": "2.0"}, "no such file"},
		"bad json":     {mapFiles{"package.json": `{`, ".kici/deploy.yaml": "enabled: true", "VERSION": "2.0"}, "not valid JSON"},
		"no reader":    {nil, "not available"},
	} {
		d := MatchWorkflow(wf, pushWith("x", tc.files))
		if d.Matched {
			t.Errorf("%s: matched", name)
			continue
		}
		last := d.Checks[len(d.Checks)-1]
		if !strings.Contains(last.Reason, tc.reason) {
			t.Errorf("%s: reason = %q, want %q", name, last.Reason, tc.reason)
		}
	}
}
