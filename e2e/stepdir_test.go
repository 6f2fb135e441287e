package e2e

import (
	"os"
	"testing"
)

// stepDir returns a fresh directory below procTmp with mode, removed at the
// end of the test. Steps write marks into such directories: as root the
// agents run steps as an unprivileged user, which can neither enter
// t.TempDir()'s private parent nor write a directory that only root may.
func stepDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp(procTmp, "marks-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
