package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// makeWritable opens up a tree a step left read-only, and a directory
// swapped for a link to a host path between the walk's listing and its
// chmod is refused, not followed: the host directory keeps its mode.
func TestMakeWritableNeverLeavesTheTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kici-job-build-0123abcd")
	outside := t.TempDir() // a host directory, as "/" would be
	for _, p := range []string{filepath.Join(dir, "sub", "etc"), filepath.Join(outside, "etc")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	swapped := false
	beforeChmod = func(p string) {
		if p != filepath.Join("sub", "etc") || swapped {
			return
		}
		swapped = true
		if err := os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub.real")); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeChmod = func(string) {} })

	makeWritable(dir)
	if !swapped {
		t.Fatal("the walk never reached sub/etc")
	}
	if fi, err := os.Stat(filepath.Join(outside, "etc")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the host directory behind the link: %v, %v; want mode 0755 untouched", fi, err)
	}
	if fi, err := os.Stat(readOnly); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a read-only directory of the tree: %v, %v; want mode 0700", fi, err)
	}
}
