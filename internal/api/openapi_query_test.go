package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// queryReads is what one function of this package reads from a request's
// query string: literal keys (q.Get("limit")) and the indexes of its own
// parameters it uses as keys (intParam's name), plus the functions it calls.
type queryReads struct {
	keys      map[string]bool
	keyParams map[int]bool
	params    map[string]int // parameter name → index
	calls     []*ast.CallExpr
}

// TestOpenAPIListsEveryQueryParameterAHandlerReads reads this package's
// source and follows each handler through the helpers it calls (intParam,
// parseIntParam, a url.Values passed along) to every query key it reads;
// the route table must list exactly those keys, so the OpenAPI document
// neither hides a filter a handler honours nor advertises one it ignores.
func TestOpenAPIListsEveryQueryParameterAHandlerReads(t *testing.T) {
	reads := parseQueryReads(t)
	// Fixpoint over the call graph: a caller reads what its callees read,
	// and a literal (or its own parameter) passed where a callee expects a
	// key.
	for changed := true; changed; {
		changed = false
		for _, f := range reads {
			for _, call := range f.calls {
				g := reads[calleeName(call)]
				if g == nil || g == f {
					continue
				}
				for k := range g.keys {
					changed = add(f.keys, k) || changed
				}
				for i := range g.keyParams {
					if i >= len(call.Args) {
						continue
					}
					switch a := call.Args[i].(type) {
					case *ast.BasicLit:
						if s, err := strconv.Unquote(a.Value); err == nil {
							changed = add(f.keys, s) || changed
						}
					case *ast.Ident:
						if j, ok := f.params[a.Name]; ok && !f.keyParams[j] {
							f.keyParams[j], changed = true, true
						}
					}
				}
			}
		}
	}
	checked := 0
	for _, rt := range routeTable() {
		if rt.handle == nil {
			continue
		}
		name := operationID(rt)
		f := reads[name]
		if f == nil {
			t.Errorf("%s: handler %s not found in this package's source", rt.key(), name)
			continue
		}
		checked++
		listed := map[string]bool{}
		for _, p := range rt.queryParams {
			listed[p] = true
			if !f.keys[p] {
				t.Errorf("%s lists query parameter %q, which %s never reads", rt.key(), p, name)
			}
		}
		for _, k := range sortedKeys(f.keys) {
			if !listed[k] {
				t.Errorf("%s: %s reads query parameter %q, missing from the route table (.query)", rt.key(), name, k)
			}
		}
	}
	if checked < 70 {
		t.Fatalf("checked only %d handlers", checked)
	}
}

func add(set map[string]bool, k string) bool {
	if set[k] {
		return false
	}
	set[k] = true
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// calleeName is the function or method name a call names ("intParam",
// "s.listRuns" → "listRuns"); "" for anything else.
func calleeName(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		return fn.Sel.Name
	}
	return ""
}

// parseQueryReads collects, per top-level function of this package's
// non-test files, its direct query reads and its calls.
func parseQueryReads(t *testing.T) map[string]*queryReads {
	t.Helper()
	fset := token.NewFileSet()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]*queryReads{}
	for _, e := range files {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			f := directReads(fd)
			if prev := reads[fd.Name.Name]; prev != nil {
				// Two methods of one name (on different types): calls are
				// resolved by name, so each call reaches both.
				for k := range f.keys {
					prev.keys[k] = true
				}
				for i := range f.keyParams {
					prev.keyParams[i] = true
				}
				prev.calls = append(prev.calls, f.calls...)
				continue
			}
			reads[fd.Name.Name] = f
		}
	}
	return reads
}

// directReads finds fd's own query reads: Get on r.URL.Query(), on a
// variable assigned from it, or on a url.Values parameter, with a literal
// key or one of fd's parameters as the key.
func directReads(fd *ast.FuncDecl) *queryReads {
	f := &queryReads{keys: map[string]bool{}, keyParams: map[int]bool{}, params: map[string]int{}}
	values := map[string]bool{} // identifiers holding a query
	i := 0
	for _, field := range fd.Type.Params.List {
		isValues := false
		if sel, ok := field.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Values" {
			isValues = true
		}
		for _, n := range field.Names {
			f.params[n.Name] = i
			values[n.Name] = values[n.Name] || isValues
			i++
		}
	}
	isQuery := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return values[x.Name]
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			return ok && sel.Sel.Name == "Query"
		}
		return false
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			for j, rhs := range x.Rhs {
				if id, ok := x.Lhs[j].(*ast.Ident); ok && j < len(x.Lhs) && isQuery(rhs) {
					values[id.Name] = true
				}
			}
		case *ast.CallExpr:
			f.calls = append(f.calls, x)
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Get" && sel.Sel.Name != "Has") || !isQuery(sel.X) || len(x.Args) != 1 {
				return true
			}
			switch a := x.Args[0].(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(a.Value); err == nil {
					f.keys[s] = true
				}
			case *ast.Ident:
				if j, ok := f.params[a.Name]; ok {
					f.keyParams[j] = true
				}
			}
		}
		return true
	})
	return f
}
