package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// restoreMarkerTable is the table a backup copy carries (and a live
// database never has): a node that starts on a file holding it knows it
// starts on a restore. It is outside the migrations on purpose: it exists
// only in copies and is dropped by the first start.
const restoreMarkerTable = "kici_backup_marker"

// BackupInfo describes a backup copy: BackupID names it; TakenAt is when
// the copy was taken (UTC).
type BackupInfo struct {
	BackupID string
	TakenAt  time.Time
}

// Backup writes an online, consistent copy of the SQLite database at src
// to dst with SQLite's VACUUM INTO (a read transaction: a running
// orchestrator keeps writing, the copy is the database at one instant),
// then marks the copy as a backup (info) so a node started on it runs the
// restore start (RestoreMarker). dst must not exist; it is created
// 0600 (it holds token hashes and sealed secrets). Errors name the file.
func Backup(ctx context.Context, src, dst string, info BackupInfo) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s already exists: choose a new file (a backup never overwrites)", dst)
	}
	db, err := openDB(ctx, src, false)
	if err != nil {
		return err
	}
	defer db.Close()
	abs, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(abs), err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", abs); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, abs, err)
	}
	if err := os.Chmod(abs, 0o600); err != nil {
		return err
	}
	cp, err := openDB(ctx, abs, false)
	if err != nil {
		return err
	}
	defer cp.Close()
	_, err = cp.ExecContext(ctx, "CREATE TABLE "+restoreMarkerTable+" (backup_id TEXT NOT NULL, taken_at TEXT NOT NULL)")
	if err == nil {
		_, err = cp.ExecContext(ctx, "INSERT INTO "+restoreMarkerTable+" (backup_id, taken_at) VALUES (?, ?)", info.BackupID, info.TakenAt.UTC().Format(time.RFC3339Nano))
	}
	if err == nil {
		// The copy is one self-contained file: no -wal beside it.
		_, err = cp.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
	if err == nil {
		_, err = cp.ExecContext(ctx, "PRAGMA journal_mode=DELETE")
	}
	if err != nil {
		return fmt.Errorf("mark backup %s: %w", abs, err)
	}
	return nil
}

// RestoreMarker reports whether the database at path is a backup copy
// not yet started (its marker, written by Backup). A missing file is no
// restore (ok false). ClearRestoreMarker removes the marker once the
// restore start is done, so a start that fails half-way runs it again.
func RestoreMarker(ctx context.Context, path string) (info BackupInfo, ok bool, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return info, false, nil
	}
	db, err := openDB(ctx, path, false)
	if err != nil {
		return info, false, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", restoreMarkerTable).Scan(&n); err != nil || n == 0 {
		return info, false, err
	}
	var taken string
	err = db.QueryRowContext(ctx, "SELECT backup_id, taken_at FROM "+restoreMarkerTable+" LIMIT 1").Scan(&info.BackupID, &taken)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return info, false, fmt.Errorf("read restore marker: %w", err)
	}
	info.TakenAt, _ = time.Parse(time.RFC3339Nano, taken)
	return info, true, nil
}

// ClearRestoreMarker drops the marker RestoreMarker reads: the restore
// start is done and later starts are ordinary ones.
func ClearRestoreMarker(ctx context.Context, path string) error {
	db, err := openDB(ctx, path, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+restoreMarkerTable); err != nil {
		return fmt.Errorf("drop restore marker: %w", err)
	}
	return nil
}
