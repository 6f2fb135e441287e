package wait

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoSleepInTestsOutsideTestutil: no test file of the module calls
// time.Sleep. A test waits for what it needs (For, Until, a channel, a
// hook); where time passing is itself the point it says so through
// Elapse. internal/testutil is the one place allowed to sleep.
func TestNoSleepInTestsOutsideTestutil(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if rel == "internal/testutil" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, line := range sleepCalls(t, rel, src) {
			found = append(found, rel+":"+strconv.Itoa(line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The module has hundreds of test files: far fewer means the walk
	// started in the wrong place and proved nothing.
	if files < 100 {
		t.Fatalf("found only %d test files under %s", files, root)
	}
	for _, f := range found {
		t.Errorf("%s: time.Sleep in a test; wait on a condition (wait.For, wait.Until, a channel) or, where time passing is the point, use wait.Elapse", f)
	}
}

// TestSleepCallsFindsEveryForm: the scan sees time.Sleep however the time
// package is imported, called or passed on, and nothing else.
func TestSleepCallsFindsEveryForm(t *testing.T) {
	src := `package p

import (
	"time"
	tm "time"
)

type clock struct{}

func (clock) Sleep(time.Duration) {}

func f() {
	time.Sleep(time.Second)
	tm.Sleep(1)
	g(time.Sleep)
	clock{}.Sleep(1)
	time.After(1)
}

func g(func(time.Duration)) {}
`
	if got := sleepCalls(t, "p_test.go", []byte(src)); len(got) != 3 || got[0] != 13 || got[1] != 14 || got[2] != 15 {
		t.Errorf("sleep lines %v, want [13 14 15]", got)
	}
	dot := "package p\n\nimport . \"time\"\n\nfunc f() { Sleep(Second) }\n"
	if got := sleepCalls(t, "d_test.go", []byte(dot)); len(got) != 1 || got[0] != 5 {
		t.Errorf("dot-import sleep lines %v, want [5]", got)
	}
}

// sleepCalls returns the lines of src (a Go file named name) that refer to
// the time package's Sleep.
func sleepCalls(t *testing.T, name string, src []byte) []int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	names := map[string]bool{}
	dot := false
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			dot = true
		default:
			names[imp.Name.Name] = true
		}
	}
	// Names that are not a reference of their own: the field or method
	// of a selector, the name of a declared function.
	notRef := map[*ast.Ident]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.SelectorExpr:
			notRef[e.Sel] = true
		case *ast.FuncDecl:
			notRef[e.Name] = true
		}
		return true
	})
	var lines []int
	ast.Inspect(f, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && names[x.Name] && e.Sel.Name == "Sleep" {
				lines = append(lines, fset.Position(e.Pos()).Line)
			}
		case *ast.Ident:
			if dot && e.Name == "Sleep" && !notRef[e] {
				lines = append(lines, fset.Position(e.Pos()).Line)
			}
		}
		return true
	})
	return lines
}

// moduleRoot is the nearest directory at or above the working directory
// that holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
