package lockfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// docYAMLBlocks returns the ```yaml blocks of a docs page.
func docYAMLBlocks(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
		if _, ok := docPiecePath(m[1]); !ok {
			out = append(out, m[1])
		}
	}
	return out
}

// docPiecePath reports whether a docs block is a piece file, written as
// "# <path>" on its first line and a top-level `piece:` key, and its path.
func docPiecePath(src string) (string, bool) {
	first, _, _ := strings.Cut(src, "\n")
	p, ok := strings.CutPrefix(first, "# ")
	if !ok || !strings.Contains("\n"+src, "\npiece:") {
		return "", false
	}
	return strings.TrimSpace(p), true
}

// docPieces serves the piece files of the docs pages to the compiler, so
// the examples that use them compile: "./<path>" by path, and a library
// piece "<library>:<path>" by the "<library>:<path>" it is written under.
type docPieces map[string]string

func (d docPieces) Local(p string) ([]byte, error) {
	if s, ok := d[p]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func (d docPieces) Library(git, ref, p string) ([]byte, string, error) {
	for k, s := range d {
		if _, rest, ok := strings.Cut(k, ":"); ok && rest == p {
			return []byte(s), strings.Repeat("0", 40), nil
		}
	}
	return nil, "", os.ErrNotExist
}

// loadDocPieces collects the piece files of every docs page.
func loadDocPieces(t *testing.T) docPieces {
	t.Helper()
	out := docPieces{}
	pages, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			if p, ok := docPiecePath(m[1]); ok {
				out[p] = m[1]
			}
		}
	}
	return out
}

// compileDoc compiles a docs example with the docs' piece files.
func compileDoc(t *testing.T, src string) (*LockFile, error) {
	t.Helper()
	return CompileWith([]SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte(src)}}, loadDocPieces(t))
}

func loadSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "workflow.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("workflow.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("workflow.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validateYAML(t *testing.T, s *jsonschema.Schema, src string) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("yaml: %v\n%s", err, src)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst)
}

// TestDocsExamplesCompile: every YAML example of docs/workflows.md is a
// complete workflow the compiler accepts, so the reference cannot describe
// a field that does not work.
func TestDocsExamplesCompile(t *testing.T) {
	blocks := docYAMLBlocks(t, "workflows.md")
	if len(blocks) < 3 {
		t.Fatalf("found %d yaml examples in docs/workflows.md", len(blocks))
	}
	for i, src := range blocks {
		if _, err := compileDoc(t, src); err != nil {
			t.Errorf("docs/workflows.md example %d does not compile: %v\n%s", i+1, err, src)
		}
	}
}

// TestWorkflowSchema: docs/workflow.schema.json accepts every workflow
// example in the docs (every ```yaml block that compiles) and every
// workflow under testdata, and rejects what the compiler rejects for
// unknown keys and wrong shapes.
func TestWorkflowSchema(t *testing.T) {
	s := loadSchema(t)
	pages, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	checked := 0
	for _, p := range pages {
		for i, src := range docYAMLBlocks(t, filepath.Base(p)) {
			if _, err := compileDoc(t, src); err != nil {
				continue // a fragment, not a workflow
			}
			checked++
			if err := validateYAML(t, s, src); err != nil {
				t.Errorf("%s example %d is rejected by the schema: %v\n%s", filepath.Base(p), i+1, err, src)
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join("..", "..", "testdata"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(filepath.ToSlash(path), ".kici/workflows/") || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		src, _ := os.ReadFile(path)
		checked++
		if err := validateYAML(t, s, string(src)); err != nil {
			t.Errorf("%s is rejected by the schema: %v", path, err)
		}
		return nil
	})
	if checked < 4 {
		t.Fatalf("only %d workflow examples checked", checked)
	}
	for _, bad := range []string{
		"jobs:\n  a:\n    runs-on: x\n    run: x\n",
		"jobs:\n  a:\n    steps:\n      - run: x\n        cwd: y\n",
		"on: {pushh: {}}\njobs:\n  a: {run: x}\n",
		"on: {push: {branch: [main]}}\njobs:\n  a: {run: x}\n",
		"jobs:\n  a: {run: x, needs: [{job: b, when: sometimes}]}\n",
		"name: ci\n",
		"drift: maybe\njobs:\n  a: {run: x}\n",
	} {
		if err := validateYAML(t, s, bad); err == nil {
			t.Errorf("schema accepts:\n%s", bad)
		}
	}
}
