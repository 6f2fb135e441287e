package membership

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadNodeIDIsCreatedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadNodeID(dir)
	if err != nil || id == "" {
		t.Fatalf("LoadNodeID = %q, %v", id, err)
	}
	fi, err := os.Stat(filepath.Join(dir, NodeIDFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node id file: %v, %v; want mode 0600", fi, err)
	}
	again, err := LoadNodeID(dir)
	if err != nil || again != id {
		t.Fatalf("second LoadNodeID = %q, %v; want the same id %q (leases are held under it)", again, err, id)
	}
}

func TestLoadNodeIDReportsAnUnwritableDataDirectory(t *testing.T) {
	if _, err := LoadNodeID(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("LoadNodeID in a missing directory succeeded")
	}
}
