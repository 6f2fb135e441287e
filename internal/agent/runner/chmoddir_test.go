package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// chmodDir changes a directory, even one left without any permission, and
// never what a link at the path points to.
func TestChmodDirRefusesLinks(t *testing.T) {
	root := t.TempDir()
	locked := filepath.Join(root, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := chmodDir(locked, 0o700); err != nil {
		t.Fatalf("chmodDir on a 0000 directory: %v", err)
	}
	if fi, err := os.Stat(locked); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode after chmodDir: %v, %v; want 0700", fi, err)
	}
	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := chmodDir(link, 0o700); err == nil {
		t.Fatal("chmodDir followed a link")
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the link's target changed: %v, %v; want 0755", fi, err)
	}
}
