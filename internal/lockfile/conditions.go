package lockfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"kici.dev/kici/internal/expr"
)

// jobScope is the expression scope of the job being compiled: its needs,
// matrix dimensions and the workflow's inputs. Nil outside a job.
type jobScope struct {
	sc expr.Scope
}

// inputNames returns the input names declared by a workflow's dispatch and
// schedule triggers, sorted.
func inputNames(ts []Trigger) []string {
	var names []string
	for _, t := range ts {
		if len(t.Inputs) == 0 {
			continue
		}
		var ds map[string]json.RawMessage
		if json.Unmarshal(t.Inputs, &ds) != nil {
			continue
		}
		for k := range ds {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	return names
}

// beginJob sets the expression scope for the job's steps, env and if.
func (f *yfile) beginJob(j *Job, refs []needRef) {
	sc := expr.Scope{Inputs: f.inputNames, InputTypes: f.inputTypes}
	for _, r := range refs {
		sc.Needs = append(sc.Needs, r.name)
	}
	if j.Matrix != nil {
		sc.Matrix = jobMatrixDims(j)
	}
	f.scope = &jobScope{sc: sc}
	// The job's env was decoded before its needs and matrix were known
	// (keys come in written order): check its templates now.
	for _, k := range sortedKeys(f.pendingEnv) {
		f.checkTemplate(f.pendingEnv[k].node, f.pendingEnv[k].val, k)
	}
	f.pendingEnv = nil
}

// endJob decodes the job's `if` and `outputs` and refuses `${{` in run
// scripts. It clears the job scope.
func (f *yfile) endJob(j *Job, ifNode, outputsNode ast.Node) {
	defer func() { f.scope, f.inJob = nil, false }()
	what := "job " + j.Name
	if ifNode != nil {
		if s, ok := f.nonEmptyStr(ifNode, what+" if"); ok {
			f.checkCondition(ifNode, s, f.scope.sc)
			j.If = s
		}
	}
	for i := range j.Steps {
		st := &j.Steps[i]
		if expr.HasTemplate(st.Run) {
			loc := st.SourceLocation
			f.errs = append(f.errs, &CompileError{File: loc.File, Line: loc.Line, Column: loc.Column,
				Msg: fmt.Sprintf("%s step %q: ${{ … }} is not expanded in `run:` (a value spliced into a script can inject commands); set it in `env:` and use \"$NAME\" in the script", what, st.Name)})
		}
	}
	if outputsNode != nil {
		j.Outputs = f.jobOutputs(j, outputsNode, what+" outputs")
	}
}

// matrixDims returns the dimension names of a job's matrix (for a list
// matrix: none, the legs are plain values).
func jobMatrixDims(j *Job) []string {
	var dims map[string]json.RawMessage
	if json.Unmarshal(j.Matrix.Values, &dims) != nil {
		return []string{}
	}
	out := make([]string, 0, len(dims))
	for k := range dims {
		out = append(out, k)
	}
	for _, inc := range j.Include {
		for k := range inc {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

var outputName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// jobOutputs decodes `outputs:`: a mapping of exported name to
// "<step>.<key>", or a list of "<step>.<key>" exported under key. The step
// must be a step of the job; it is marked hasOutputs.
func (f *yfile) jobOutputs(j *Job, n ast.Node, what string) map[string]string {
	type decl struct {
		name, ref string
		node      ast.Node
	}
	var decls []decl
	if _, isSeq := f.resolve(n).(*ast.SequenceNode); isSeq {
		items, _ := f.sequence(n, what, false)
		for _, it := range items {
			if s, ok := f.nonEmptyStr(it, what+" entries"); ok {
				_, key, _ := strings.Cut(s, ".")
				decls = append(decls, decl{name: key, ref: s, node: it})
			}
		}
	} else {
		entries, ok := f.mapping(n, what)
		if !ok {
			return nil
		}
		for _, e := range entries {
			if s, ok := f.nonEmptyStr(e.val, what+" "+e.key); ok {
				decls = append(decls, decl{name: e.key, ref: s, node: e.val})
			}
		}
	}
	out := map[string]string{}
	for _, d := range decls {
		step, key, ok := strings.Cut(d.ref, ".")
		if !ok || step == "" || !outputName.MatchString(key) {
			f.errorf(d.node, "%s: %q must be <step>.<key> (the key a step writes to $KICI_OUTPUT)", what, d.ref)
			continue
		}
		if !outputName.MatchString(d.name) {
			f.errorf(d.node, "%s: %q is not a valid output name (letters, digits, _ and -)", what, d.name)
			continue
		}
		if _, dup := out[d.name]; dup {
			f.errorf(d.node, "%s: %q is declared twice", what, d.name)
			continue
		}
		idx := slices.IndexFunc(j.Steps, func(s Step) bool { return s.Name == step })
		if idx < 0 {
			f.errorf(d.node, "%s: %q names step %q, which is not a step of this job", what, d.ref, step)
			continue
		}
		j.Steps[idx].HasOutputs = true
		out[d.name] = d.ref
	}
	return out
}

// stepCondition checks a step's `if` against the job scope plus the names
// of the earlier steps.
func (f *yfile) stepCondition(n ast.Node, earlier []Step, what string) string {
	s, ok := f.nonEmptyStr(n, what)
	if !ok {
		return ""
	}
	sc := expr.Scope{Step: true, Inputs: f.inputNames, InputTypes: f.inputTypes}
	if f.scope != nil {
		sc = f.scope.sc
		sc.Step = true
	}
	for _, st := range earlier {
		sc.Steps = append(sc.Steps, st.Name)
	}
	f.checkCondition(n, s, sc)
	return s
}

// checkCondition compiles a condition and reports an error at its position
// in the YAML file.
func (f *yfile) checkCondition(n ast.Node, src string, sc expr.Scope) {
	if _, err := expr.Compile(src, sc); err != nil {
		f.exprError(n, err, "if")
	}
}

// pendingEnvVal is a job env value whose templates are checked once the
// job's scope is known.
type pendingEnvVal struct {
	node ast.Node
	val  string
}

// envTemplate is called for every env value: outside a job (workflow env)
// templates are checked against the inputs and the event only; inside a job
// before its scope is known, the check waits for beginJob.
func (f *yfile) envTemplate(n ast.Node, val, key string, inJob bool) {
	if !expr.HasTemplate(val) {
		return
	}
	if inJob && f.scope == nil {
		if f.pendingEnv == nil {
			f.pendingEnv = map[string]pendingEnvVal{}
		}
		f.pendingEnv[key] = pendingEnvVal{node: n, val: val}
		return
	}
	f.checkTemplate(n, val, key)
}

// checkTemplate checks an env value's templates: a step's env against its
// job's scope plus the earlier steps (`${{ steps.meta.outputs.version }}`,
// expanded on the agent just before the step runs), a job's against the
// job's scope, the workflow's against the inputs and the event.
func (f *yfile) checkTemplate(n ast.Node, val, key string) {
	sc := expr.Scope{Inputs: f.inputNames, InputTypes: f.inputTypes}
	if f.scope != nil {
		sc = f.scope.sc
	}
	if f.earlierSteps != nil {
		sc.Step, sc.Steps = true, f.earlierSteps
	}
	if err := expr.CheckTemplate(val, sc); err != nil {
		f.exprError(n, err, "env "+key)
	}
}

// exprError reports an expression error at the YAML position of the
// expression: the scalar's start plus the error's line and column (one more
// column for a quoted scalar's opening quote).
func (f *yfile) exprError(n ast.Node, err error, what string) {
	line, col := nodePos(f.resolve(n))
	var e *expr.Error
	if !errors.As(err, &e) {
		f.errs = append(f.errs, &CompileError{File: f.path, Line: line, Column: col, Msg: fmt.Sprintf("%s: %v", what, err)})
		return
	}
	if sn, ok := f.resolve(n).(*ast.StringNode); ok && sn.Token != nil && (strings.HasPrefix(sn.Token.Origin, "\"") || strings.HasPrefix(strings.TrimSpace(sn.Token.Origin), "'") || strings.HasPrefix(strings.TrimSpace(sn.Token.Origin), "\"")) {
		col++
	}
	if e.Line > 1 {
		line += e.Line - 1
		col = e.Column
	} else {
		col += e.Column - 1
	}
	f.errs = append(f.errs, &CompileError{File: f.path, Line: line, Column: col, Msg: fmt.Sprintf("%s: %s", what, e.Msg)})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// driftModes are the values of a workflow's `drift:` key.
var driftModes = []string{"fail", "warn"}

func (f *yfile) drift(n ast.Node) string {
	s, ok := f.str(n, "drift")
	if !ok {
		return ""
	}
	if !slices.Contains(driftModes, s) {
		f.errorf(n, "drift must be fail or warn, got %q", s)
		return ""
	}
	if s == "fail" {
		return ""
	}
	return s
}

// checkOutputRefs reports needs.<job>.outputs.<key> uses (in a job's or
// step's if and in env templates) of outputs the upstream job does not
// declare: they would always read "". Reported at the using job's name.
func (f *yfile) checkOutputRefs(jobs []Job, nodes []jobNode) {
	declared := map[string]map[string]string{}
	for _, j := range jobs {
		declared[j.Name] = j.Outputs
	}
	for i, j := range jobs {
		var refs []expr.OutputRef
		refs = append(refs, expr.OutputRefs(j.If, false)...)
		for _, k := range sortedKeys(j.Env) {
			refs = append(refs, expr.OutputRefs(j.Env[k], true)...)
		}
		for _, s := range j.Steps {
			refs = append(refs, expr.OutputRefs(s.If, false)...)
			for _, k := range sortedKeys(s.Env) {
				refs = append(refs, expr.OutputRefs(s.Env[k], true)...)
			}
		}
		for _, r := range refs {
			outs, known := declared[r.Job]
			if !known {
				continue // not a job: reported by the scope check
			}
			if _, ok := outs[r.Key]; !ok {
				f.errorf(nodes[i].node, "job %q uses needs.%s.outputs.%s, but job %q declares no output %q (declared: %s)",
					j.Name, r.Job, r.Key, r.Job, r.Key, strings.Join(sortedKeys(outs), ", "))
			}
		}
	}
}
