package lockfile

import (
	"errors"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

const validateBase = `name: v
on:
  push:
    branches: [main]
jobs:
  a:
    steps:
      - run: echo a
  b:
    needs: [a]
    steps:
      - run: echo b
        retry: 2
`

// A lock edited by hand (or by an attacker) is held to the compiler's
// limits when the orchestrator loads it.
func TestParseRejectsHostileLocks(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(lf *LockFile)
	}{
		{"huge retry", "retry.maxAttempts", func(lf *LockFile) { lf.Workflows[0].Jobs[1].Steps[0].Retry.MaxAttempts = 1000000000 }},
		{"zero retry", "retry.maxAttempts", func(lf *LockFile) { lf.Workflows[0].Jobs[1].Steps[0].Retry.MaxAttempts = 0 }},
		{"negative step timeout", "timeout", func(lf *LockFile) { lf.Workflows[0].Jobs[0].Steps[0].Timeout = -5 }},
		{"endless job timeout", "timeout", func(lf *LockFile) { lf.Workflows[0].Jobs[0].Timeout = 1 << 60 }},
		{"negative grace", "gracePeriod", func(lf *LockFile) { lf.Workflows[0].Jobs[0].GracePeriod = -1 }},
		{"needs cycle", "needs cycle", func(lf *LockFile) {
			lf.Workflows[0].Jobs[0].Needs = []Need{{Name: "b", RunOn: []status.Job{status.JobSuccess}}}
		}},
		{"self need", "cannot need itself", func(lf *LockFile) {
			lf.Workflows[0].Jobs[0].Needs = []Need{{Name: "a", RunOn: []status.Job{status.JobSuccess}}}
		}},
		{"unknown need", `unknown job "zz"`, func(lf *LockFile) { lf.Workflows[0].Jobs[1].Needs[0].Name = "zz" }},
		{"duplicate job", "duplicate job name", func(lf *LockFile) { lf.Workflows[0].Jobs[1].Name = "a" }},
		{"no steps", "no steps", func(lf *LockFile) { lf.Workflows[0].Jobs[0].Steps = nil }},
		{"duplicate workflow", "duplicate workflow name", func(lf *LockFile) { lf.Workflows = append(lf.Workflows, lf.Workflows[0]) }},
		{"bad backoff", "retry.backoff", func(lf *LockFile) { lf.Workflows[0].Jobs[1].Steps[0].Retry.Backoff = "random" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lf, err := Compile([]SourceFile{{Path: ".kici/workflows/v.yaml", Source: []byte(validateBase)}})
			if err != nil {
				t.Fatal(err)
			}
			c.edit(lf)
			data, err := Encode(lf)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data)
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want a ParseError mentioning %q", err, c.want)
			}
		})
	}
	// The unedited lock still loads.
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/v.yaml", Source: []byte(validateBase)}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := Encode(lf)
	if _, err := Parse(data); err != nil {
		t.Fatalf("valid lock rejected: %v", err)
	}
}
