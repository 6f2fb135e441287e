package scaler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "work")
	if err := EnsurePrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %v err %v, want a 0700 directory", fi, err)
	}
	if err := EnsurePrivateDir(fresh); err != nil {
		t.Fatalf("existing private dir refused: %v", err)
	}

	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(loose); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable dir: err %v", err)
	}
	if fi, _ := os.Stat(loose); fi.Mode().Perm() != 0o777 {
		t.Errorf("refused dir was changed to %v", fi.Mode().Perm())
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(link); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("symlink: err %v", err)
	}

	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(file); err == nil {
		t.Error("regular file accepted as work dir")
	}

	// Another user's directory (made by chown, which needs root; as
	// non-root the case cannot be built and is reported, not passed).
	foreign := filepath.Join(base, "foreign")
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(foreign); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("foreign-owned dir: err %v", err)
		}
	} else {
		t.Log("not root: cannot create a directory owned by another user; ownership check not exercised")
	}
}

func TestBareMetalRefusesUnsafeWorkDir(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	b := NewBareMetal(BareMetalOptions{AgentBinary: "/bin/true", WorkDir: work, LogDir: filepath.Join(dir, "agents")}, nil)
	req := &SpawnRequest{AgentID: "a1", Token: "kat_x", Entry: &Entry{Name: "s", Type: TypeBareMetal},
		LabelSet: &LabelSet{}, Emit: func(EventType, string) {}}
	err := b.Spawn(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "work directory") {
		t.Fatalf("Spawn with a world-writable work dir: err %v, want a work directory error", err)
	}
	if b.Active() != 0 {
		t.Fatal("an agent was started")
	}
}
