package pieces

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckURL accepts the transports kici fetches libraries over and
// refuses git's command-running remote helpers and option-like URLs.
func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"https://git.example.com/acme/ci.git", "ssh://git@git.example.com/acme/ci.git", "git@git.example.com:acme/ci.git", "file:///srv/git/ci.git", "/srv/git/ci.git"} {
		if msg := CheckURL(ok); msg != "" {
			t.Errorf("%s refused: %s", ok, msg)
		}
	}
	for _, bad := range []string{"ext::sh -c touch% /tmp/x", "fd::3", "http://git.example.com/ci.git", "-uhelp", "relative/path", "https://x/a b"} {
		if CheckURL(bad) == "" {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLocalStaysInTheRepository: a piece path with .. or a symlink out of
// the repository is refused; a missing file is ErrNotFound.
func TestLocalStaysInTheRepository(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("piece: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(root, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ok.yaml"), []byte("piece: ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Root: root}
	if f, err := r.Local("ok.yaml"); err != nil || string(f.Data) != "piece: ok\n" {
		t.Fatalf("ok.yaml: %v", err)
	}
	if _, err := r.Local("link.yaml"); err == nil || !strings.Contains(err.Error(), "leads out of the repository") {
		t.Errorf("symlink out: %v", err)
	}
	if _, err := r.Local("../x.yaml"); err == nil {
		t.Error("../x.yaml accepted")
	}
	if _, err := r.Local("none.yaml"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	if _, err := r.Local("notes.txt"); err == nil {
		t.Error("a non-YAML piece path accepted")
	}
}
