package checkout

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mirrorStore makes a mirror object store holding the given pack files
// (mode 0444, as git writes them) and, when loose, one loose object.
func mirrorStore(t *testing.T, loose bool, packs ...string) string {
	t.Helper()
	objects := filepath.Join(t.TempDir(), "objects")
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range packs {
		if err := os.WriteFile(filepath.Join(objects, "pack", p), []byte(p), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if loose {
		if err := os.MkdirAll(filepath.Join(objects, "ab"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return objects
}

func TestLinkMirrorPacksLinksEveryPackFile(t *testing.T) {
	objects := mirrorStore(t, false, "pack-1.pack", "pack-1.idx", "pack-1.rev")
	if err := os.WriteFile(filepath.Join(objects, "pack", "tmp_pack_x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	linked, ok := linkMirrorPacks(objects, dst)
	if !ok || len(linked) != 3 {
		t.Fatalf("linked %v ok %v, want the 3 pack files", linked, ok)
	}
	for _, name := range []string{"pack-1.pack", "pack-1.idx", "pack-1.rev"} {
		a, err1 := os.Stat(filepath.Join(objects, "pack", name))
		b, err2 := os.Stat(filepath.Join(dst, name))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) || !linked[filepath.Join(dst, name)] {
			t.Errorf("%s: not the mirror's file linked (%v, %v)", name, err1, err2)
		}
		if n := b.Sys().(*syscall.Stat_t).Nlink; n != 2 {
			t.Errorf("%s: %d links, want 2", name, n)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "tmp_pack_x")); err == nil {
		t.Error("a temporary file of a fetch in progress was linked")
	}
}

func TestLinkMirrorPacksRefusesLooseObjects(t *testing.T) {
	dst := t.TempDir()
	if linked, ok := linkMirrorPacks(mirrorStore(t, true, "pack-1.pack", "pack-1.idx"), dst); ok || linked != nil {
		t.Fatalf("linked %v ok %v with loose objects in the mirror, want a refusal", linked, ok)
	}
	if es, _ := os.ReadDir(dst); len(es) != 0 {
		t.Errorf("refusal left %d files behind", len(es))
	}
}

func TestLinkMirrorPacksRefusesPrivatePacksAndCleansUp(t *testing.T) {
	objects := mirrorStore(t, false, "pack-1.idx", "pack-1.pack")
	if err := os.Chmod(filepath.Join(objects, "pack", "pack-1.pack"), 0o400); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, ok := linkMirrorPacks(objects, dst); ok {
		t.Fatal("a pack the step user cannot read was linked")
	}
	if es, _ := os.ReadDir(dst); len(es) != 0 {
		t.Errorf("refusal left %d links behind (the step user would own none of them)", len(es))
	}
}
