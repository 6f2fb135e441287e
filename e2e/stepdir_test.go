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

// marksRoot is the directory of the marks directories (marksDir): the
// agents of the tests share it with every job's steps.
var marksRoot string

// marksDir returns a fresh world-writable directory for a test's steps to
// leave marks in, below marksRoot (a job's sandbox shows nothing else of
// the host writable), removed at the end of the test.
func marksDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(marksRoot, "marks-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
