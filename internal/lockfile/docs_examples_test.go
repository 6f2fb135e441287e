package lockfile

import (
	"strings"
	"testing"
)

// TestDocsWorkflowExamplesCompile compiles every workflow example (a YAML
// block with top-level jobs:) of the pages that teach workflows, so an
// example a user copies is one kici accepts. The examples that run end to
// end live in testdata/pipelines.
func TestDocsWorkflowExamplesCompile(t *testing.T) {
	n := 0
	for _, page := range []string{"workflows.md", "caches-and-artifacts.md"} {
		for i, src := range docYAMLBlocks(t, page) {
			if !strings.HasPrefix(src, "jobs:") && !strings.Contains(src, "\njobs:") {
				continue
			}
			n++
			if _, err := compileDoc(t, src); err != nil {
				t.Errorf("docs/%s: YAML example %d does not compile: %v\n%s", page, i+1, err, src)
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d workflow examples, want the pages' examples (did the fences change?)", n)
	}
}
