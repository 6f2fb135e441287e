package lockfile

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

func (f *yfile) steps(n ast.Node, what string) []Step {
	items, ok := f.sequence(n, what+" steps", false)
	if !ok {
		return []Step{}
	}
	if len(items) == 0 {
		f.errorf(n, "%s has an empty steps list", what)
		return []Step{}
	}
	steps := []Step{}
	seen := map[string]ast.Node{}
	unnamed := 0
	for i, it := range items {
		sw := fmt.Sprintf("%s step %d", what, i+1)
		if f.hasKey(it, "uses") {
			for _, ps := range f.usedSteps(it, sw) {
				if _, dup := seen[ps.Name]; dup {
					f.errorf(it, "%s: the piece's step %q has the name of an earlier step of this job", sw, ps.Name)
				}
				seen[ps.Name] = it
				steps = append(steps, ps)
			}
			continue
		}
		entries, ok := f.mapping(it, sw)
		if !ok {
			continue
		}
		f.strict(entries, "step", "name", "run", "shell", "env", "workingDirectory", "timeout", "retry", "continueOnError", "when", "attest", "secrets", "if")
		line, col := nodePos(f.resolve(it))
		s := Step{SourceLocation: &Location{File: f.path, Line: line, Column: col}}
		f.earlierSteps = make([]string, 0, len(steps))
		for _, st := range steps {
			f.earlierSteps = append(f.earlierSteps, st.Name)
		}
		var nameNode ast.Node
		hasRun := false
		for _, e := range entries {
			switch e.key {
			case "name":
				nameNode = e.val
				s.Name, _ = f.nonEmptyStr(e.val, sw+" name")
			case "run":
				hasRun = true
				s.Run, _ = f.nonEmptyStr(e.val, sw+" run")
			case "shell":
				s.Shell, _ = f.nonEmptyStr(e.val, sw+" shell")
			case "env":
				s.Env = f.envMap(e.val, sw+" env")
			case "workingDirectory":
				if d, ok := f.nonEmptyStr(e.val, sw+" workingDirectory"); ok {
					if msg := checkWorkDir(d); msg != "" {
						f.errorf(e.val, "%s workingDirectory %q %s", sw, d, msg)
					}
					s.WorkingDirectory = d
				}
			case "timeout":
				s.Timeout, _ = f.duration(e.val, sw+" timeout")
			case "retry":
				s.Retry = f.retry(e.val, sw+" retry")
			case "continueOnError":
				s.ContinueOnError, _ = f.boolean(e.val, sw+" continueOnError")
			case "when":
				s.RunOn = f.stepWhen(e.val, sw+" when")
			case "attest":
				s.Attest = f.attestPaths(e.val, sw+" attest")
			case "secrets":
				s.Secrets = f.secretMap(e.val, sw+" secrets")
			case "if":
				s.If = f.stepCondition(e.val, steps, sw+" if")
			}
		}
		if !hasRun {
			f.errorf(it, "%s has no `run` command", sw)
		}
		if nameNode == nil {
			unnamed++
			s.Name = fmt.Sprintf("step-%d", unnamed)
			nameNode = it
		}
		if s.Name != "" {
			if _, dup := seen[s.Name]; dup {
				f.errorf(nameNode, "%s: duplicate step name %q", what, s.Name)
			}
			seen[s.Name] = nameNode
		}
		steps = append(steps, s)
	}
	f.earlierSteps = nil
	return steps
}

func checkWorkDir(d string) string {
	if filepath.IsAbs(d) || strings.HasPrefix(d, "/") || strings.HasPrefix(d, "\\") {
		return "must be relative to the checkout"
	}
	for _, part := range strings.FieldsFunc(d, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "must not leave the checkout (..)"
		}
	}
	return ""
}

// retry decodes `retry: N` (N attempts, KiCI defaults: 1s delay,
// exponential backoff, 30s max delay) or {maxAttempts, delay, backoff,
// maxDelay}.
func (f *yfile) retry(n ast.Node, what string) *Retry {
	rt := &Retry{MaxAttempts: 1, DelayMs: 1000, Backoff: "exponential", MaxDelayMs: 30000}
	if in, ok := f.resolve(n).(*ast.IntegerNode); ok {
		v, ok := f.intRange(in, what, 1, 10)
		if !ok {
			return nil
		}
		rt.MaxAttempts = v
		return rt
	}
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "maxAttempts", "delay", "backoff", "maxDelay")
	hasMax := false
	for _, e := range entries {
		switch e.key {
		case "maxAttempts":
			rt.MaxAttempts, _ = f.intRange(e.val, what+" maxAttempts", 1, 10)
			hasMax = true
		case "delay":
			rt.DelayMs, _ = f.duration(e.val, what+" delay")
		case "maxDelay":
			rt.MaxDelayMs, _ = f.duration(e.val, what+" maxDelay")
		case "backoff":
			if s, ok := f.str(e.val, what+" backoff"); ok {
				if s != "fixed" && s != "exponential" {
					f.errorf(e.val, "%s backoff must be fixed or exponential, got %q", what, s)
				}
				rt.Backoff = s
			}
		}
	}
	if !hasMax {
		f.errorf(n, "%s needs maxAttempts (1..10)", what)
	}
	return rt
}
