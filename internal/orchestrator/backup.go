package orchestrator

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store/sqlite"
)

// BackupResult is what Backup wrote: the database copy, its id, and the
// copied master key file ("" without withKey).
type BackupResult struct {
	File, BackupID, KeyFile string
}

// Backup writes an online, consistent copy of the embedded SQLite
// database of dataDir to out (sqlite.Backup: VACUUM INTO, safe while the
// orchestrator runs), marked so the first node started on it runs the
// restore start (restore.go). withKey also copies the master key file
// (KICI_SECRET_KEY_FILE, else <data dir>/secret.key) to out + ".secret.key"
// (0600); a key given inline in KICI_SECRET_KEY is refused there (it lives
// in the operator's secret store, not in a file kici can copy).
func Backup(ctx context.Context, dataDir, out string, withKey bool, getenv func(string) string) (*BackupResult, error) {
	res := &BackupResult{File: out, BackupID: uuid.NewString()}
	keySrc := ""
	if withKey {
		if strings.TrimSpace(getenv("KICI_SECRET_KEY")) != "" {
			return nil, fmt.Errorf("--with-key: the master key is given inline in KICI_SECRET_KEY; keep it in your secret store beside the backup and drop --with-key")
		}
		keySrc = strings.TrimSpace(getenv("KICI_SECRET_KEY_FILE"))
		if keySrc == "" {
			keySrc = filepath.Join(dataDir, "secret.key")
		}
		if _, err := os.Stat(keySrc); err != nil {
			return nil, fmt.Errorf("--with-key: no master key file: %w", err)
		}
		res.KeyFile = out + ".secret.key"
		if _, err := os.Stat(res.KeyFile); err == nil {
			return nil, fmt.Errorf("%s already exists: choose a new --out (a backup never overwrites)", res.KeyFile)
		}
	}
	if err := sqlite.Backup(ctx, sqlitePath(dataDir), out, sqlite.BackupInfo{BackupID: res.BackupID, TakenAt: time.Now().UTC()}); err != nil {
		return nil, err
	}
	if keySrc != "" {
		if err := copyPrivate(keySrc, res.KeyFile); err != nil {
			return nil, fmt.Errorf("copy master key: %w", err)
		}
	}
	return res, nil
}

// copyPrivate copies src to a new file dst with mode 0600.
func copyPrivate(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
