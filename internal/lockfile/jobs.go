package lockfile

import (
	"slices"
	"strings"

	"kici.dev/kici/internal/runs/status"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/trigger/pattern"
)

// whenKeywords maps a YAML `needs[].when` keyword to its runOn set (KiCI
// resolveWhenToRunOn).
var whenKeywords = map[string][]status.Job{
	"on-success": {status.JobSuccess},
	"always":     status.TerminalJobs(),
	"on-skip":    {status.JobSuccess, status.JobSkipped},
	"on-failure": {status.JobFailed, status.JobTimedOutStale},
}

// jobNode keeps a job's positions for the graph checks.
type jobNode struct {
	name  string
	node  ast.Node
	needs []needRef
}

type needRef struct {
	name string
	node ast.Node
}

func (f *yfile) jobs(n ast.Node, wfEnv map[string]string) []Job {
	entries, ok := f.mapping(n, "jobs")
	if !ok {
		return []Job{}
	}
	if len(entries) == 0 {
		f.errorf(n, "workflow has no jobs")
	}
	jobs := []Job{}
	var nodes []jobNode
	index := map[string]int{}
	for _, e := range entries {
		if msg := checkJobName(e.key); msg != "" {
			f.errorf(e.knode, "job name %q %s", e.key, msg)
			continue
		}
		var j Job
		var refs []needRef
		if f.hasKey(e.val, "uses") {
			j, refs = f.usedJob(e.key, e.knode, e.val, wfEnv)
		} else {
			j, refs = f.job(e.key, e.knode, e.val, wfEnv)
		}
		index[e.key] = len(jobs)
		jobs = append(jobs, j)
		nodes = append(nodes, jobNode{name: e.key, node: e.knode, needs: refs})
	}
	// needs: missing, self, cycles
	for _, jn := range nodes {
		for _, r := range jn.needs {
			if r.name == jn.name {
				f.errorf(r.node, "job %q needs itself", jn.name)
			} else if _, ok := index[r.name]; !ok {
				f.errorf(r.node, "job %q needs %q, which is not a job of this workflow", jn.name, r.name)
			}
		}
	}
	if cycle := findCycle(nodes, index); cycle != nil {
		jn := nodes[index[cycle[0]]]
		f.errorf(jn.node, "jobs form a dependency cycle: %s", strings.Join(cycle, " → "))
	}
	f.checkOutputRefs(jobs, nodes)
	if name, msg := checkDownloads(jobs); msg != "" {
		f.errorf(nodes[index[name]].node, "job %q %s", name, msg)
	}
	return jobs
}

func checkJobName(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case strings.HasPrefix(s, "__"):
		return "must not start with __ (reserved for internal jobs)"
	case strings.ContainsAny(s, "(),\n\r\t"):
		return "must not contain parentheses, commas or control characters"
	}
	return ""
}

// findCycle returns the job names of one dependency cycle (first name
// repeated at the end), or nil.
func findCycle(nodes []jobNode, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(nodes))
	var stack []string
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, nodes[i].name)
		for _, r := range nodes[i].needs {
			k, ok := index[r.name]
			if !ok || k == i {
				continue
			}
			switch color[k] {
			case grey:
				start := slices.Index(stack, r.name)
				cycle = append(slices.Clone(stack[start:]), r.name)
				return true
			case white:
				if visit(k) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range nodes {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

func (f *yfile) job(name string, knode, n ast.Node, wfEnv map[string]string) (Job, []needRef) {
	j := Job{Type: "static", Name: name, RunsOn: []LabelMatcher{}, RunsOnPick: "deterministic", Needs: []Need{}, Steps: []Step{}}
	if len(wfEnv) > 0 {
		j.Env = make(map[string]string, len(wfEnv))
		for k, v := range wfEnv {
			j.Env[k] = v
		}
	}
	entries, ok := f.mapping(n, "job "+name)
	if !ok {
		return j, nil
	}
	what := "job " + name
	f.strict(entries, what, "description", "runsOn", "needs", "matrix", "env", "timeout", "gracePeriod", "checkout", "steps", "run", "secrets", "contexts",
		"cache", "artifacts", "download", "container", "services", "if", "outputs", "gitCredentials")
	f.inJob = true
	var refs []needRef
	var stepsNode, runNode, ifNode, outputsNode ast.Node
	for _, e := range entries {
		switch e.key {
		case "description":
			j.Description, _ = f.str(e.val, what+" description")
		case "runsOn":
			f.runsOn(&j, e.val, what+" runsOn")
		case "needs":
			if f.hasPreset {
				f.errorf(e.knode, "a job piece cannot declare `needs`; the job that uses it does")
				continue
			}
			j.Needs, refs = f.needs(e.val, what+" needs")
		case "matrix":
			f.matrix(&j, e.val, what+" matrix")
		case "env":
			for k, v := range f.envMap(e.val, what+" env") {
				if j.Env == nil {
					j.Env = map[string]string{}
				}
				j.Env[k] = v
			}
		case "timeout":
			j.Timeout, _ = f.duration(e.val, what+" timeout")
		case "secrets":
			j.Secrets = f.secretMap(e.val, what+" secrets")
		case "contexts":
			j.Contexts = f.contextList(e.val, what+" contexts")
		case "gitCredentials":
			f.gitCredentials(&j, e.val, what+" gitCredentials") // gitcredentials.go
		case "cache", "artifacts", "download", "container", "services":
			f.jobBlobs(&j, e.key, e.val, what)
		case "gracePeriod":
			if ms, ok := f.duration(e.val, what+" gracePeriod"); ok {
				j.GracePeriod = int((ms + 999) / 1000)
			}
		case "checkout":
			if b, ok := f.boolean(e.val, what+" checkout"); ok {
				j.Checkout = &b
			}
		case "steps":
			stepsNode = e.val
		case "run":
			runNode = e.val
		case "if":
			ifNode = e.val
		case "outputs":
			outputsNode = e.val
		}
	}
	if f.hasPreset {
		j.Needs, refs = f.presetNeeds, f.presetRefs
	}
	f.beginJob(&j, refs)
	switch {
	case stepsNode != nil && runNode != nil:
		f.errorf(runNode, "%s: use either `steps` or the `run` shorthand, not both", what)
	case runNode != nil:
		if s, ok := f.nonEmptyStr(runNode, what+" run"); ok {
			line, col := nodePos(runNode)
			j.Steps = append(j.Steps, Step{Name: "step-1", Run: s, SourceLocation: &Location{File: f.path, Line: line, Column: col}})
		}
	case stepsNode != nil:
		j.Steps = f.steps(stepsNode, what)
	default:
		f.errorf(knode, "%s has no steps (add `steps:` or `run:`)", what)
	}
	f.endJob(&j, ifNode, outputsNode)
	return j, refs
}

func (f *yfile) runsOn(j *Job, n ast.Node, what string) {
	r := f.resolve(n)
	if _, isMap := r.(*ast.MappingNode); isMap || isMappingValue(r) {
		entries, ok := f.mapping(n, what)
		if !ok {
			return
		}
		f.strict(entries, what, "labels", "exclude", "pick")
		for _, e := range entries {
			switch e.key {
			case "labels":
				j.RunsOn = f.labelList(e.val, what+" labels")
			case "exclude":
				j.ExcludeLabels = f.labelList(e.val, what+" exclude")
			case "pick":
				if s, ok := f.str(e.val, what+" pick"); ok {
					if s != "deterministic" && s != "any" {
						f.errorf(e.val, "%s pick must be deterministic or any, got %q", what, s)
					}
					j.RunsOnPick = s
				}
			}
		}
		for _, in := range j.RunsOn {
			for _, ex := range j.ExcludeLabels {
				if in.Kind == MatcherExact && ex.Kind == MatcherExact && in.Value == ex.Value {
					f.errorf(n, "%s: label %q is both required and excluded", what, in.Value)
				}
			}
		}
		return
	}
	j.RunsOn = f.labelList(n, what)
}

func isMappingValue(n ast.Node) bool {
	_, ok := n.(*ast.MappingValueNode)
	return ok
}

// labelList decodes label matchers: plain strings are exact labels, strings
// with glob syntax become RE2 regex matchers, {regex, flags} are regexes.
func (f *yfile) labelList(n ast.Node, what string) []LabelMatcher {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return []LabelMatcher{}
	}
	out := []LabelMatcher{}
	for _, it := range items {
		if s, ok := f.scalar(it); ok {
			switch {
			case strings.TrimSpace(s) == "":
				f.errorf(it, "%s: labels must be non-empty", what)
			case strings.HasPrefix(s, "!"):
				f.errorf(it, "%s: %q: negated labels are not allowed here; use runsOn: {labels: [...], exclude: [...]}", what, s)
			case pattern.IsGlob(s):
				src, err := pattern.LabelGlobRegex(s)
				if err != nil {
					f.errorf(it, "%s: %v", what, err)
					continue
				}
				if err := pattern.CheckSafeRegex(src, ""); err != nil {
					f.errorf(it, "%s: %v", what, err)
					continue
				}
				out = append(out, LabelMatcher{Kind: "regex", Source: src, Flags: ""})
			default:
				out = append(out, LabelMatcher{Kind: "exact", Value: s})
			}
			continue
		}
		m := LabelMatcher{Kind: "regex"}
		if m.Source, m.Flags, ok = f.regexMapping(it, what+" entry"); !ok {
			continue
		}
		if err := pattern.CheckSafeRegex(m.Source, m.Flags); err != nil {
			f.errorf(it, "%s: %v", what, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

func (f *yfile) needs(n ast.Node, what string) ([]Need, []needRef) {
	items, ok := f.sequence(n, what, true)
	if !ok {
		return []Need{}, nil
	}
	out := []Need{}
	var refs []needRef
	seen := map[string]bool{}
	for _, it := range items {
		need := Need{RunOn: []status.Job{status.JobSuccess}}
		if s, ok := f.scalar(it); ok {
			need.Name = s
		} else {
			entries, ok := f.mapping(it, what+" entries")
			if !ok {
				continue
			}
			f.strict(entries, what+" entry", "job", "when")
			for _, e := range entries {
				switch e.key {
				case "job":
					need.Name, _ = f.nonEmptyStr(e.val, what+" job")
				case "when":
					need.RunOn = f.when(e.val, what+" when")
				}
			}
		}
		if need.Name == "" {
			f.errorf(it, "%s: entry needs a job name", what)
			continue
		}
		if seen[need.Name] {
			f.errorf(it, "%s: %q is listed twice", what, need.Name)
			continue
		}
		seen[need.Name] = true
		out = append(out, need)
		refs = append(refs, needRef{name: need.Name, node: it})
	}
	return out, refs
}

func (f *yfile) when(n ast.Node, what string) []status.Job {
	if s, ok := f.scalar(n); ok {
		set, known := whenKeywords[s]
		if !known {
			f.errorf(n, "%s must be on-success, always, on-failure, on-skip or a list of statuses, got %q", what, s)
			return []status.Job{status.JobSuccess}
		}
		return slices.Clone(set)
	}
	list, ok := f.strList(n, what)
	if !ok {
		return []status.Job{status.JobSuccess}
	}
	if len(list) == 0 {
		f.errorf(n, "%s: the status list must not be empty", what)
		return []status.Job{status.JobSuccess}
	}
	out := make([]status.Job, len(list))
	for i, s := range list {
		out[i] = status.Job(s)
		if !out[i].IsTerminal() {
			f.errorf(n, "%s: %q is not a terminal job status (%s)", what, s, strings.Join(status.Strings(status.TerminalJobs()), ", "))
		}
	}
	return out
}
