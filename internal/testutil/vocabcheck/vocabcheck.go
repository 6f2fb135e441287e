// Package vocabcheck finds raw string literals in test code where a named
// vocabulary type is expected: a literal such as "pending" compared with,
// assigned to or passed as a status.Job compiles only because status.Job
// is a string type, and it silently stops meaning anything when the word
// is renamed. A vocabulary type is a named type whose underlying type is
// string and whose package declares constants of it; a literal is a
// violation when its value equals one of those constants (other values,
// such as "" or a deliberately unknown word, have no constant to use).
package vocabcheck

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"sort"
)

// Violation is one raw literal that should name a constant.
type Violation struct {
	// Pos is the literal's file:line:column.
	Pos token.Position
	// Value is the literal's string value.
	Value string
	// Type is the vocabulary type it was converted to (e.g.
	// "kici.dev/kici/internal/runs/status.Job").
	Type string
	// Const is the constant to use instead, qualified by its package path.
	Const string
}

// String formats v as "file:line: raw "value" where T is expected; use C".
func (v Violation) String() string {
	return fmt.Sprintf("%s: raw %q where %s is expected; use %s", v.Pos, v.Value, v.Type, v.Const)
}

// Result is what Check found in one package.
type Result struct {
	// Sites counts the places a vocabulary type's word is spelled in the
	// checked files: string literals converted to such a type (violations
	// included) and uses of its constants. A check that finds none looked
	// at nothing.
	Sites int
	// Violations are the literals that equal a constant of their type,
	// in file order.
	Violations []Violation
	// TypeErrors are the type-checking errors met; the literals in the
	// parts that did type-check are still checked.
	TypeErrors []error
}

// Check type-checks files as package path with imp and reports the string
// literals in the files for which inScope returns true. Type errors do not
// stop the check; they are returned in Result.TypeErrors.
func Check(fset *token.FileSet, path string, files []*ast.File, imp types.Importer, inScope func(filename string) bool) Result {
	var res Result
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp, Error: func(err error) { res.TypeErrors = append(res.TypeErrors, err) }}
	_, _ = conf.Check(path, fset, files, info)
	consts := map[*types.Named]map[string]string{}
	for _, f := range files {
		if !inScope(fset.Position(f.Pos()).Filename) {
			continue
		}
		conversions := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if c, ok := info.Uses[n].(*types.Const); ok {
					if named, ok := c.Type().(*types.Named); ok && vocabulary(named, consts) {
						res.Sites++
					}
				}
			case *ast.CallExpr:
				// T("word") is an explicit conversion, a deliberate act.
				if tv, ok := info.Types[n.Fun]; ok && tv.IsType() && len(n.Args) == 1 {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok {
						conversions[lit] = true
					}
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING || conversions[n] {
					return true
				}
				tv, ok := info.Types[n]
				if !ok {
					return true
				}
				named, ok := tv.Type.(*types.Named)
				if !ok || !vocabulary(named, consts) {
					return true
				}
				byValue := consts[named]
				res.Sites++
				val := constant.StringVal(constant.MakeFromLiteral(n.Value, token.STRING, 0))
				if name, ok := byValue[val]; ok {
					res.Violations = append(res.Violations, Violation{Pos: fset.Position(n.Pos()), Value: val,
						Type: named.Obj().Pkg().Path() + "." + named.Obj().Name(), Const: named.Obj().Pkg().Path() + "." + name})
				}
			}
			return true
		})
	}
	sort.SliceStable(res.Violations, func(i, j int) bool {
		a, b := res.Violations[i].Pos, res.Violations[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
	return res
}

// vocabulary reports whether t is a vocabulary type: a named string type
// whose package declares constants of it. consts caches constantsOf.
func vocabulary(t *types.Named, consts map[*types.Named]map[string]string) bool {
	if t.Obj().Pkg() == nil {
		return false
	}
	if b, ok := t.Underlying().(*types.Basic); !ok || b.Info()&types.IsString == 0 {
		return false
	}
	byValue, ok := consts[t]
	if !ok {
		byValue = constantsOf(t)
		consts[t] = byValue
	}
	return len(byValue) > 0
}

// constantsOf maps each value of the exported constants of type t declared
// in t's package to the constant's name (the first in name order when two
// share a value).
func constantsOf(t *types.Named) map[string]string {
	out := map[string]string{}
	scope := t.Obj().Pkg().Scope()
	for _, name := range scope.Names() {
		c, ok := scope.Lookup(name).(*types.Const)
		if !ok || !c.Exported() || !types.Identical(c.Type(), t) || c.Val().Kind() != constant.String {
			continue
		}
		if v := constant.StringVal(c.Val()); v != "" {
			if _, dup := out[v]; !dup {
				out[v] = name
			}
		}
	}
	return out
}

// ExportImporter returns an importer reading the compiler's export data
// files of exports (import path → file, as `go list -export` prints them).
func ExportImporter(fset *token.FileSet, exports map[string]string) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}
