package filecopy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestToNewCopiesIntoANewFileOnly(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("secret bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ToNew(src, dst, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil || string(b) != "secret bytes" {
		t.Fatalf("copy holds %q (%v)", b, err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy mode %v, want 0600", fi.Mode().Perm())
	}
	if err := ToNew(src, dst, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("copy over an existing file: %v, want os.ErrExist", err)
	}
	// A link planted at the destination is not followed.
	victim, planted := filepath.Join(dir, "victim"), filepath.Join(dir, "planted")
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if err := ToNew(src, planted, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("copy onto a symlink: %v, want os.ErrExist", err)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Fatalf("the link's target was created (%v)", err)
	}
}
