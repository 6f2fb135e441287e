package lockfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeWorkflow(t *testing.T, src string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ".kici", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestCompileRefusesOversizedWorkflowFile(t *testing.T) {
	src := "name: big\non: push\njobs:\n  a:\n    steps:\n      - run: echo " + strings.Repeat("x", MaxWorkflowFileSize) + "\n"
	_, _, err := CompileDir(writeWorkflow(t, src))
	if err == nil || !strings.Contains(err.Error(), "big.yaml:1:1") || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("err = %v, want a file:line:col error about the size limit", err)
	}
}

// Anchors let a small file expand into a huge lock; compile refuses a lock
// the orchestrator would refuse to load.
func TestCompileRefusesLockOverTheLoadLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: big\non: push\njobs:\n  a:\n    steps:\n      - &s\n        run: echo " + strings.Repeat("y", 30000) + "\n")
	for i := 0; i < 200; i++ {
		b.WriteString("      - *s\n")
	}
	_, _, err := CompileDir(writeWorkflow(t, b.String()))
	if err == nil || !strings.Contains(err.Error(), "byte limit the orchestrator accepts") {
		t.Fatalf("err = %v, want the lock size limit", err)
	}
}
