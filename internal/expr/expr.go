// Package expr compiles and evaluates the `if:` conditions of jobs and steps.
//
// The language is github.com/expr-lang/expr: a small, side-effect-free,
// statically typed expression language with a Go-native checker. It was
// chosen over google/cel-go because it type-checks against plain Go structs
// (the environment below is the schema, no protobuf declarations), has no
// transitive dependencies, reports error positions per character, and has a
// built-in node limit and memory budget, which matter because a workflow's
// conditions are authored by whoever can push to the repository and are
// evaluated on the orchestrator.
//
// A condition sees the variables of Env (jobs) or StepEnv (steps). Values
// are only ever compared or passed to functions: nothing an expression
// produces is spliced into a shell script.
package expr

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"kici.dev/kici/internal/trigger/pattern"
)

// MaxSourceLen caps a condition's text: 4 KiB.
const MaxSourceLen = 4096

// maxNodes caps a condition's syntax tree, so that an expression cannot make
// the orchestrator spend unbounded time compiling or running it.
const maxNodes = 2000

// Event describes what started the run. Branch and Tag are short names
// ("main", "v1.2.0"), empty when the ref is not of that kind.
type Event struct {
	// Type is the trigger type: push, pull_request, tag, dispatch,
	// schedule, manual, … (the run's triggerType).
	Type   string `expr:"type"`
	Ref    string `expr:"ref"`
	Branch string `expr:"branch"`
	Tag    string `expr:"tag"`
	SHA    string `expr:"sha"`
	// Actor is who triggered the run (the forge user, or the admin token's
	// subject for a manual run).
	Actor string `expr:"actor"`
	// Repo is the "owner/repo" identifier.
	Repo string `expr:"repo"`
	// TargetBranch is the branch a pull request targets (or the pushed
	// branch).
	TargetBranch string `expr:"targetBranch"`
	// ChangedPaths are the files the event changed, when known.
	ChangedPaths []string `expr:"changedPaths"`
}

// Need is what a job sees of one upstream job: its terminal status
// (success, failed, skipped, …) and its exported outputs.
type Need struct {
	Result  string            `expr:"result"`
	Outputs map[string]string `expr:"outputs"`
}

// Env is the environment of a job condition.
type Env struct {
	Event  Event             `expr:"event"`
	Inputs map[string]any    `expr:"inputs"`
	Matrix map[string]string `expr:"matrix"`
	Needs  map[string]Need   `expr:"needs"`
}

// Step is what a step condition sees of an earlier step of its job.
type Step struct {
	// Outcome is success, failed or skipped.
	Outcome string            `expr:"outcome"`
	Outputs map[string]string `expr:"outputs"`
}

// StepEnv is the environment of a step condition and of a step's `env:`
// templates: the job's environment plus the earlier steps of the job and
// the job's environment variables.
type StepEnv struct {
	Env
	Steps map[string]Step `expr:"steps"`
	// JobEnv is `env`: the variables every step of the job starts with
	// (the KICI_* job variables, the job's context variables and its
	// `env:`), so `if: env.DEPLOY == "yes"` is a condition over the
	// job's environment. A variable not set reads as "".
	JobEnv map[string]string `expr:"env"`
}

// Scope says where a condition is written, for the compile-time checks.
type Scope struct {
	// Step is true for a step condition (StepEnv), false for a job one.
	Step bool
	// Needs are the job's upstream job names; `needs.<name>` must be one.
	Needs []string
	// Matrix are the job's matrix dimensions; `matrix.<name>` must be one.
	// Nil means the job has no matrix (any `matrix.` use is an error).
	Matrix []string
	// Inputs are the input names the workflow's dispatch and schedule
	// triggers declare; `inputs.<name>` must be one of them.
	Inputs []string
	// InputTypes are their declared types (string, number, integer,
	// boolean, enum, literal; "" = any, a nullable input): a condition is
	// type-checked against them, so `inputs.repeat > "2"` on an integer
	// input is a compile error. An input without an entry is any.
	InputTypes map[string]string
	// Steps are the names of the earlier steps (step conditions only).
	Steps []string
}

// Error is a compile error with a 1-based line and column inside the
// condition's text.
type Error struct {
	Line, Column int
	Msg          string
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg) }

// Program is a compiled condition.
type Program struct {
	src string
	p   *vm.Program
}

// Source returns the condition's text.
func (p *Program) Source() string { return p.src }

func options(step, asBool bool) []expr.Option {
	var env any = Env{}
	if step {
		env = StepEnv{}
	}
	opts := []expr.Option{
		expr.Env(env), expr.MaxNodes(maxNodes),
		expr.Function("glob", globFn, new(func(string, string) bool)),
	}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	return opts
}

// globFn implements glob(pattern, value): picomatch glob matching, the
// rules of trigger patterns (e.g. `any(event.changedPaths, glob("docs/**", #))`).
func globFn(params ...any) (any, error) {
	pat, _ := params[0].(string)
	val, _ := params[1].(string)
	re, err := pattern.CompileGlob(pat)
	if err != nil {
		return nil, fmt.Errorf("glob(%q): %v", pat, err)
	}
	return re.Match(val), nil
}

// Compile parses and type-checks a condition against its scope. The result
// must be a boolean; names outside the environment, `needs.<job>` of a job
// not in Needs, unknown matrix dimensions, undeclared inputs and unknown
// steps are errors. Errors are *Error.
func Compile(src string, sc Scope) (*Program, error) {
	return compile(src, sc, true)
}

func compile(src string, sc Scope, asBool bool) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Msg: "empty condition"}
	}
	if len(src) > MaxSourceLen {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("condition is %d bytes; at most %d", len(src), MaxSourceLen)}
	}
	// The names are checked first (an undeclared input is named as such),
	// then the types against the declared input types.
	p, err := expr.Compile(src, options(sc.Step, asBool)...)
	if err != nil {
		return nil, compileError(src, sc, err)
	}
	node := p.Node()
	c := &refChecker{src: src, sc: sc}
	ast.Walk(&node, c)
	if c.err != nil {
		return nil, c.err
	}
	if err := typeCheck(src, sc, asBool); err != nil {
		return nil, compileError(src, sc, err)
	}
	return &Program{src: src, p: p}, nil
}

// refChecker reports `needs.x`, `matrix.x`, `inputs.x` and `steps.x`
// member accesses whose x the scope does not declare.
type refChecker struct {
	src string
	sc  Scope
	err *Error
}

func (c *refChecker) Visit(n *ast.Node) {
	if c.err != nil {
		return
	}
	m, ok := (*n).(*ast.MemberNode)
	if !ok {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok {
		return
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	var known []string
	var what string
	switch id.Value {
	case "needs":
		known, what = c.sc.Needs, "is not in this job's needs"
	case "matrix":
		known, what = c.sc.Matrix, "is not a matrix dimension of this job"
	case "inputs":
		known, what = c.sc.Inputs, "is not an input of this workflow's dispatch or schedule triggers"
	case "steps":
		known, what = c.sc.Steps, "is not an earlier step of this job"
	default:
		return
	}
	for _, k := range known {
		if k == prop.Value {
			return
		}
	}
	loc := id.Location()
	line, col := position(c.src, loc.From)
	c.err = &Error{Line: line, Column: col, Msg: fmt.Sprintf("%s.%s: %q %s%s", id.Value, prop.Value, prop.Value, what, didYouMean(prop.Value, known))}
}

// position turns a rune offset into a 1-based line and column.
func position(src string, from int) (int, int) {
	line, col, i := 1, 1, 0
	for _, r := range src {
		if i == from {
			break
		}
		i++
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// Eval runs a compiled condition. env must be an Env (job conditions) or a
// StepEnv (step conditions), matching the scope it was compiled for.
// A missing map entry reads as the zero value ("" or nil).
func (p *Program) Eval(env any) (bool, error) {
	out, err := expr.Run(p.p, env)
	if err != nil {
		return false, fmt.Errorf("if %s: %v", p.src, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("if %s: result is %v, not a boolean", p.src, reflect.TypeOf(out))
	}
	return b, nil
}

// EvalString compiles and runs src in one go, for callers holding only the
// condition's text (the lock stores conditions as text; they were checked
// when the lock was compiled). The scope is not checked.
func EvalString(src string, env any) (bool, error) {
	_, step := env.(StepEnv)
	p, err := expr.Compile(src, options(step, true)...)
	if err != nil {
		return false, fmt.Errorf("if %s: %v", src, err)
	}
	return (&Program{src: src, p: p}).Eval(env)
}

// OutputRef is a `needs.<Job>.outputs.<Key>` use in a condition or
// template.
type OutputRef struct{ Job, Key string }

// OutputRefs lists the needs.<job>.outputs.<key> uses of a condition or
// of a template's expressions (none when src does not parse).
func OutputRefs(src string, template bool) []OutputRef {
	srcs := []string{src}
	if template {
		parts, err := Parts(src)
		if err != nil {
			return nil
		}
		srcs = srcs[:0]
		for _, p := range parts {
			srcs = append(srcs, p.Src)
		}
	}
	var out []OutputRef
	for _, s := range srcs {
		tree, err := parser.Parse(s)
		if err != nil {
			continue
		}
		v := &outputRefVisitor{}
		ast.Walk(&tree.Node, v)
		out = append(out, v.refs...)
	}
	return out
}

type outputRefVisitor struct{ refs []OutputRef }

func (v *outputRefVisitor) Visit(n *ast.Node) {
	key, ok := (*n).(*ast.MemberNode)
	if !ok {
		return
	}
	outs, ok := key.Node.(*ast.MemberNode)
	if !ok {
		return
	}
	job, ok := outs.Node.(*ast.MemberNode)
	if !ok {
		return
	}
	needs, ok := job.Node.(*ast.IdentifierNode)
	k, ok1 := key.Property.(*ast.StringNode)
	o, ok2 := outs.Property.(*ast.StringNode)
	j, ok3 := job.Property.(*ast.StringNode)
	if ok && ok1 && ok2 && ok3 && needs.Value == "needs" && o.Value == "outputs" {
		v.refs = append(v.refs, OutputRef{Job: j.Value, Key: k.Value})
	}
}
