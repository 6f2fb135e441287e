package api

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitectureListsEveryPackage walks the module's package directories
// (every directory under cmd/, internal/, e2e/ and scripts/ holding a Go
// file, testdata excluded) and fails for each one docs/architecture.md does
// not name in backquotes: a package nobody described is a package nobody
// can find. It lives here because this package already checks its docs.
func TestArchitectureListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	for _, top := range []string{"cmd", "internal", "e2e", "scripts"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				pkgs[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !pkgs["internal/api"] || len(pkgs) < 50 {
		t.Fatalf("walk found %d packages, not the module's: %v", len(pkgs), pkgs)
	}
	for p := range pkgs {
		if !strings.Contains(string(doc), "`"+p+"`") {
			t.Errorf("docs/architecture.md does not list package %s (add a row with its one job)", p)
		}
	}
}
