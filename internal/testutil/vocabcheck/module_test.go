package vocabcheck

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listed is the part of `go list -json` the check reads.
type listed struct {
	ImportPath   string
	Dir          string
	Export       string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// goList runs `go list -e -json=fields args...` in the module root.
func goList(t *testing.T, root string, fields string, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=" + fields}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// testCode reports whether the package at import path is test support
// code as a whole (storetest, pgtest and the other testutil packages).
func testCode(path string) bool {
	return strings.HasSuffix(path, "test") || strings.Contains(path, "/internal/testutil/")
}

// Every test file of the module (and every test support package) names
// the constants of the run, job and step states, providers, delivery and
// event-log statuses, hold words and the other vocabulary types instead of
// spelling their values.
func TestTestsUseVocabularyConstants(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	exports := map[string]string{}
	for _, p := range goList(t, root, "ImportPath,Export", "-export", "-deps", "-test", "./...") {
		if p.Export != "" && !strings.Contains(p.ImportPath, " ") {
			exports[p.ImportPath] = p.Export
		}
	}
	pkgs := goList(t, root, "ImportPath,Dir,GoFiles,TestGoFiles,XTestGoFiles", "./...")
	var sites, checked, typeErrs int
	for _, p := range pkgs {
		whole := testCode(p.ImportPath)
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 && !whole {
			continue
		}
		tests := map[string]bool{}
		for _, f := range append(append([]string(nil), p.TestGoFiles...), p.XTestGoFiles...) {
			tests[filepath.Join(p.Dir, f)] = true
		}
		inScope := func(name string) bool { return whole || tests[name] }
		for _, set := range []struct {
			path  string
			files []string
		}{
			{p.ImportPath, append(append([]string(nil), p.GoFiles...), p.TestGoFiles...)},
			{p.ImportPath + "_test", p.XTestGoFiles},
		} {
			if len(set.files) == 0 {
				continue
			}
			fset := token.NewFileSet()
			var files []*ast.File
			for _, name := range set.files {
				f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				files = append(files, f)
			}
			res := Check(fset, set.path, files, ExportImporter(fset, exports), inScope)
			checked++
			sites += res.Sites
			typeErrs += len(res.TypeErrors)
			for _, e := range res.TypeErrors {
				t.Logf("%s: type error: %v", set.path, e)
			}
			for _, v := range res.Violations {
				rel, _ := filepath.Rel(root, v.Pos.Filename)
				t.Errorf("%s:%d:%d: raw %q where %s is expected; use %s", rel, v.Pos.Line, v.Pos.Column, v.Value, v.Type, v.Const)
			}
		}
	}
	t.Logf("checked %d packages, %d vocabulary-typed literal sites, %d type errors", checked, sites, typeErrs)
	if checked < 20 || sites < 500 {
		t.Fatalf("checked %d packages and %d sites: the check saw too little to mean anything", checked, sites)
	}
}
