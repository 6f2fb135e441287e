package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A backup is one self-contained file: its copy is taken out of WAL mode
// (the header's read and write versions are 1, rollback journal) and no
// -wal file is left beside it, while the live database stays open; it
// carries the restore marker.
func TestBackupIsOneFileOutOfWALMode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := filepath.Join(dir, "copy", "kici.db")
	if err := Backup(ctx, filepath.Join(dir, "kici.db"), dst, BackupInfo{BackupID: "b-1"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 100 || b[18] != 1 || b[19] != 1 {
		t.Fatalf("copy header read/write versions = %v, want 1 1 (out of WAL mode)", b[18:20])
	}
	if _, err := os.Stat(dst + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("a -wal file is beside the copy (stat: %v)", err)
	}
	info, ok, err := RestoreMarker(ctx, dst)
	if err != nil || !ok || info.BackupID != "b-1" {
		t.Fatalf("restore marker = %+v, %v, %v; want b-1", info, ok, err)
	}
}
