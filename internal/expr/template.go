package expr

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// A template is a string with `${{ expression }}` parts, accepted in `env`
// values only. Each part is evaluated and its value (a string, or a number
// or boolean printed in Go's %v form) replaces it. The result becomes an
// environment variable; a script reads it as "$NAME", so the shell never
// parses the value as code.

const (
	openDelim  = "${{"
	closeDelim = "}}"
)

// Part is one `${{ … }}` occurrence: Offset is the byte offset of "${{" in
// the template, Src the expression between the delimiters.
type Part struct {
	Offset int
	Src    string
}

// HasTemplate reports whether s contains a `${{` opening.
func HasTemplate(s string) bool { return strings.Contains(s, openDelim) }

// Parts splits a template into its expressions. An unclosed `${{` is an
// error naming its byte offset.
func Parts(s string) ([]Part, error) {
	var out []Part
	for i := 0; ; {
		k := strings.Index(s[i:], openDelim)
		if k < 0 {
			return out, nil
		}
		start := i + k
		end := strings.Index(s[start+len(openDelim):], closeDelim)
		if end < 0 {
			return nil, &Error{Line: 1, Column: start + 1, Msg: "unclosed ${{ (missing }})"}
		}
		src := s[start+len(openDelim) : start+len(openDelim)+end]
		out = append(out, Part{Offset: start, Src: src})
		i = start + len(openDelim) + end + len(closeDelim)
	}
}

// CheckTemplate compiles every expression of a template against sc. The
// error's Column is the byte offset (1-based) inside the template.
func CheckTemplate(s string, sc Scope) error {
	parts, err := Parts(s)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := compile(p.Src, sc, false); err != nil {
			if e, ok := err.(*Error); ok && e.Line == 1 {
				e.Column += p.Offset + len(openDelim)
				return e
			}
			return err
		}
	}
	return nil
}

// Interpolate evaluates the expressions of a template against env (an Env
// or a StepEnv) and returns the text with each `${{ … }}` replaced. A nil
// value becomes "".
func Interpolate(s string, env any) (string, error) {
	if !HasTemplate(s) {
		return s, nil
	}
	parts, err := Parts(s)
	if err != nil {
		return "", err
	}
	_, step := env.(StepEnv)
	var b strings.Builder
	last := 0
	for _, p := range parts {
		prog, err := expr.Compile(p.Src, options(step, false)...)
		if err != nil {
			return "", fmt.Errorf("${{%s}}: %v", p.Src, err)
		}
		v, err := expr.Run(prog, env)
		if err != nil {
			return "", fmt.Errorf("${{%s}}: %v", p.Src, err)
		}
		b.WriteString(s[last:p.Offset])
		if v != nil {
			fmt.Fprint(&b, v)
		}
		last = p.Offset + len(openDelim) + len(p.Src) + len(closeDelim)
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// UsesStepScope reports whether a template reads what only the agent knows
// when the step is about to run: `steps` (earlier steps' outcomes and
// outputs) or `env` (the job's environment). Such a step env value is left
// for the agent to expand (false when the template does not parse: the
// orchestrator then reports the error).
func UsesStepScope(s string) bool {
	parts, err := Parts(s)
	if err != nil {
		return false
	}
	for _, p := range parts {
		tree, err := parser.Parse(p.Src)
		if err != nil {
			continue
		}
		v := &identVisitor{}
		ast.Walk(&tree.Node, v)
		if v.names["steps"] || v.names["env"] {
			return true
		}
	}
	return false
}

// identVisitor collects the identifiers of an expression.
type identVisitor struct{ names map[string]bool }

func (v *identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		if v.names == nil {
			v.names = map[string]bool{}
		}
		v.names[id.Value] = true
	}
}
