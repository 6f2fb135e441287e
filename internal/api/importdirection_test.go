package api

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// modulePath prefixes the module's import paths.
const modulePath = "kici.dev/kici/"

// serverLayers ranks the packages of the server core, lowest first: a
// package may import only packages of a lower layer (or of its own tree,
// e.g. internal/runs/status from internal/runs). A package not listed
// takes the layer of its closest listed parent directory; one with none is
// a foundation package (layer 0: store, protocol, lockfile, logstore,
// auth, the cluster bus, ...), which imports no listed package. The path
// of a delivery runs up this list: ingest creates runs, the tracker
// releases jobs to dispatch, agents' frames come back through the
// tracker's own interfaces (runs.JobReports, runs.Subscriber) rather than
// imports, and internal/orchestrator, on top, only wires.
var serverLayers = []struct {
	name string
	pkgs []string
}{
	{"foundation", []string{"internal/api/apitypes", "internal/runs/status", "internal/approval/hold", "internal/spawn", "internal/scaler/scalerconfig", "internal/scaler/fcapi"}},
	{"runs", []string{"internal/runs"}},
	{"components on runs", []string{"internal/dispatch", "internal/scaler", "internal/approval", "internal/forgestatus"}},
	{"run control and ingest", []string{"internal/runctl", "internal/ingest", "internal/jobdata", "internal/servermetrics"}},
	{"membership", []string{"internal/membership"}},
	{"schedules", []string{"internal/scheduler"}},
	{"api and web", []string{"internal/api", "internal/web"}},
	{"clients", []string{"internal/cli"}},
	{"wiring", []string{"internal/orchestrator"}},
}

// layerOf returns the layer index of pkg (a module-relative directory)
// and the listed package (its unit) it belongs to; unlisted foundation
// packages are their own unit at layer 0.
func layerOf(pkg string) (int, string) {
	best, layer := "", 0
	for i, l := range serverLayers {
		for _, p := range l.pkgs {
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
				best, layer = p, i
			}
		}
	}
	if best == "" {
		return 0, pkg
	}
	return layer, best
}

// importViolation explains why from may not import to, or returns "".
func importViolation(from, to string) string {
	fl, fu := layerOf(from)
	tl, tu := layerOf(to)
	switch {
	case fu == tu:
		return "" // one package tree
	case tl < fl || (fl == 0 && tl == 0):
		return ""
	case tl == fl:
		return "imports " + to + " of its own layer (" + serverLayers[fl].name + "): siblings reach each other through interfaces the wiring connects"
	}
	return "imports " + to + " of a higher layer (" + serverLayers[tl].name + " above " + serverLayers[fl].name + ")"
}

// TestImportDirection parses the imports of every non-test Go file under
// internal/ (go/parser, imports only) and fails, naming the import, for
// each package that imports one of its own or a higher layer of
// serverLayers: the server core's dependencies point one way, down to the
// foundation, and internal/orchestrator is imported by no package of
// internal/.
func TestImportDirection(t *testing.T) {
	root := filepath.Join("..", "..")
	imports := map[string]map[string]bool{} // package dir → module imports
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, modulePath) {
				imports[pkg][strings.TrimPrefix(p, modulePath)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports["internal/orchestrator"]) == 0 || len(imports) < 50 {
		t.Fatalf("parsed %d packages, not the module's", len(imports))
	}
	for _, l := range serverLayers {
		for _, p := range l.pkgs {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("serverLayers lists %s, which does not exist", p)
			}
		}
	}
	var pkgs []string
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, from := range pkgs {
		var tos []string
		for to := range imports[from] {
			tos = append(tos, to)
		}
		sort.Strings(tos)
		for _, to := range tos {
			if why := importViolation(from, to); why != "" {
				t.Errorf("%s %s", from, why)
			}
		}
	}
}

// TestImportDirectionRule checks the rule itself on imports the server
// core must never have.
func TestImportDirectionRule(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"internal/ingest", "internal/runs", true},
		{"internal/dispatch", "internal/runs", true},
		{"internal/runs", "internal/runs/status", true},
		{"internal/runs", "internal/store", true},
		{"internal/store/sqlite", "internal/store", true},
		{"internal/store", "internal/api/apitypes", true},
		{"internal/store", "internal/api", false},
		{"internal/orchestrator", "internal/api", true},
		{"internal/runs", "internal/dispatch", false},
		{"internal/store", "internal/runs", false},
		{"internal/scaler", "internal/dispatch", false},
		{"internal/dispatch", "internal/scaler", false},
		{"internal/dispatch", "internal/runctl", false},
		{"internal/runs/status", "internal/runs", false},
		{"internal/api", "internal/orchestrator", false},
		{"internal/dispatch/queue", "internal/orchestrator", false},
	} {
		if got := importViolation(c.from, c.to) == ""; got != c.ok {
			t.Errorf("%s → %s allowed = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
