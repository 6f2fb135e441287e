package lockfile

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestDocsExample keeps the complete example of docs/workflows.md valid and
// its documented matrix legs true.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## A complete example\n\n```yaml\n")
	if !ok {
		t.Fatal("example not found")
	}
	src, _, _ := strings.Cut(rest, "```\n")
	lf, err := Compile([]SourceFile{{Path: ".kici/workflows/ci.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	test := lf.Workflows[0].Jobs[1]
	legs, err := ExpandMatrix(&test)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range legs {
		names = append(names, l.Name)
	}
	want := []string{"test (pg, 1.22)", "test (pg, 1.23)", "test (mysql, 1.23)", "test (1.24, pg)"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("legs = %q, want %q", names, want)
	}
}

// TestDocsStepScopeExample keeps the step conditions and step env example
// of docs/workflows.md compiling.
func TestDocsStepScopeExample(t *testing.T) {
	src := docExample(t, "workflows.md", "### Step conditions and step env\n")
	if _, err := Compile([]SourceFile{{Path: ".kici/workflows/release.yaml", Source: []byte(src)}}); err != nil {
		t.Fatal(err)
	}
}

// docExample is the first yaml block after heading in docs/<page>; the
// test fails when the section or its example is gone.
func docExample(t *testing.T, page, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/" + page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/%s: section %q not found", page, heading)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatalf("docs/%s: no example after %q", page, heading)
	}
	src, _, _ := strings.Cut(rest, "```\n")
	return src
}
