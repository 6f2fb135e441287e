package expr

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"

	"kici.dev/kici/internal/suggest"
)

// inputType is the expression type of a declared input type: the Go type
// a run's value has (lockfile.InputDescriptor.Coerce gives numbers as
// float64).
func inputType(declared string) types.Type {
	switch declared {
	case "string", "enum", "choice":
		return types.String
	case "number", "integer":
		return types.Float64
	case "boolean":
		return types.Bool
	}
	return types.Any // literal, nullable or unknown: checked at run time
}

// typedEnv is the environment a condition is type-checked against: the
// Go types of Env/StepEnv, with `inputs` typed by the scope's declared
// input types (undeclared names stay any: refChecker names them).
func typedEnv(sc Scope) types.Map {
	inputs := types.Map{types.Extra: types.Any}
	for name, t := range sc.InputTypes {
		inputs[name] = inputType(t)
	}
	m := types.Map{
		"event":  types.TypeOf(Event{}),
		"inputs": inputs,
		"matrix": types.TypeOf(map[string]string{}),
		"needs":  types.TypeOf(map[string]Need{}),
	}
	if sc.Step {
		m["steps"] = types.TypeOf(map[string]Step{})
		m["env"] = types.TypeOf(map[string]string{})
	}
	return m
}

// typeCheck type-checks src against typedEnv(sc) (the checker only: the
// program that runs is compiled against the Go structs Eval receives).
func typeCheck(src string, sc Scope, asBool bool) error {
	cfg := conf.CreateNew()
	for _, op := range append(options(sc.Step, asBool), expr.Env(typedEnv(sc))) {
		op(cfg)
	}
	cfg.Check()
	_, err := checker.ParseCheck(src, cfg)
	return err
}

// topNames are the names a condition of scope sc may start with.
func topNames(sc Scope) []string {
	names := []string{"event", "inputs", "matrix", "needs"}
	if sc.Step {
		names = append(names, "steps", "env")
	}
	return names
}

// fieldNames lists the expr names of a struct's fields (Event's
// `branch`, `changedPaths`, …).
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	var out []string
	for i := range t.NumField() {
		if n := t.Field(i).Tag.Get("expr"); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// hyphenRef matches a scope member written with a hyphen, which the
// language reads as a subtraction: steps.cross-build is steps.cross - build.
var hyphenRef = regexp.MustCompile(`\b(steps|needs|matrix|inputs|env)\.([A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)+)`)

var (
	unknownNameRE = regexp.MustCompile(`^unknown name (\S+)`)
	noFieldRE     = regexp.MustCompile(`^type (\S+) has no field (\S+)`)
)

// compileError turns the expression library's error into an *Error at the
// right place, with a hint where one helps: the index form for a name with
// a hyphen, and the closest known name for a misspelt one.
func compileError(src string, sc Scope, err error) *Error {
	if m := hyphenRef.FindStringSubmatchIndex(src); m != nil {
		scope, name := src[m[2]:m[3]], src[m[4]:m[5]]
		line, col := position(src, len([]rune(src[:m[0]])))
		hint := ""
		if known := scopeNames(sc, scope); known != nil && !slices.Contains(known, name) {
			hint = didYouMean(name, known)
		}
		return &Error{Line: line, Column: col, Msg: fmt.Sprintf("%s.%s reads as %q (a subtraction): write %s[%q] for a name with \"-\"%s",
			scope, name, scope+"."+strings.Replace(name, "-", " - ", 1), scope, name, hint)}
	}
	var fe *file.Error
	if !errors.As(err, &fe) {
		return &Error{Line: 1, Column: 1, Msg: err.Error()}
	}
	msg := fe.Message
	if strings.Contains(msg, "mismatched type") {
		msg += declaredTypes(src, sc)
	}
	if m := unknownNameRE.FindStringSubmatch(msg); m != nil {
		msg += didYouMean(m[1], topNames(sc))
	} else if m := noFieldRE.FindStringSubmatch(msg); m != nil && m[1] == "expr.Event" {
		msg += didYouMean(m[2], fieldNames(Event{}))
	} else if m != nil && m[1] == "expr.Need" {
		msg += didYouMean(m[2], fieldNames(Need{}))
	} else if m != nil && m[1] == "expr.Step" {
		msg += didYouMean(m[2], fieldNames(Step{}))
	}
	return &Error{Line: max(fe.Line, 1), Column: fe.Column + 1, Msg: msg}
}

// scopeNames are the names the scope declares under steps, needs, matrix
// or inputs (nil for env, whose names are not known at compile time).
func scopeNames(sc Scope, scope string) []string {
	switch scope {
	case "steps":
		return sc.Steps
	case "needs":
		return sc.Needs
	case "matrix":
		return sc.Matrix
	case "inputs":
		return sc.Inputs
	}
	return nil
}

var inputRef = regexp.MustCompile(`\binputs\.([A-Za-z_][A-Za-z0-9_]*)`)

// declaredTypes names the declared types of the inputs src reads, for a
// type error: "; inputs.repeat is declared integer: compare it with a
// number".
func declaredTypes(src string, sc Scope) string {
	var parts []string
	seen := map[string]bool{}
	for _, m := range inputRef.FindAllStringSubmatch(src, -1) {
		name := m[1]
		t, ok := sc.InputTypes[name]
		if !ok || t == "" || seen[name] {
			continue
		}
		seen[name] = true
		parts = append(parts, fmt.Sprintf("inputs.%s is declared %s: compare it with %s", name, t, typeWord(inputType(t))))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// typeWord says in words what a value of an input type is compared with.
func typeWord(t types.Type) string {
	switch t {
	case types.Float64:
		return "a number"
	case types.Bool:
		return "true or false"
	case types.String:
		return "a string"
	}
	return "a value of its type"
}

// didYouMean is `; did you mean "x"?` for the known name closest to name
// (at most two edits, or a third of its letters for a long name, apart),
// "" when none is that close.
func didYouMean(name string, known []string) string {
	best, bestD := "", max(2, len(name)/3)+1
	for _, k := range known {
		if d := suggest.Distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || best == name {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}
