// Package backup copies the embedded database for `kici-admin backup`
// and makes a node started on a restored copy safe: the copy is the past,
// so the jobs in flight in it are ended rather than run a second time and
// no schedule fires for the past again (docs/operations.md, "Backup and
// restore").
package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/filecopy"
	"kici.dev/kici/internal/store/sqlite"
)

// Result is what Backup wrote: the database copy, its id (a uuid), and
// the copied master key file ("" without the key).
type Result struct {
	File, BackupID, KeyFile string
}

// Backup writes an online, consistent copy of the embedded SQLite
// database of dataDir to out (sqlite.Backup: VACUUM INTO, safe while the
// orchestrator runs), marked so the first node started on it runs the
// restore start (DetectMarker). withKey also copies the master key file
// (KICI_SECRET_KEY_FILE, else <data dir>/secret.key, read through getenv)
// to out + ".secret.key" (0600). Errors: a key given inline in
// KICI_SECRET_KEY with withKey (it lives in the operator's secret store,
// not in a file kici can copy), no key file, an existing key copy (a
// backup never overwrites), or the copy failing.
func Backup(ctx context.Context, dataDir, out string, withKey bool, getenv func(string) string) (*Result, error) {
	res := &Result{File: out, BackupID: uuid.NewString()}
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
	if err := sqlite.Backup(ctx, config.DatabaseFile(dataDir), out, sqlite.BackupInfo{BackupID: res.BackupID, TakenAt: time.Now().UTC()}); err != nil {
		return nil, err
	}
	if keySrc != "" {
		if err := filecopy.ToNew(keySrc, res.KeyFile, 0o600); err != nil {
			return nil, fmt.Errorf("copy master key: %w", err)
		}
	}
	return res, nil
}
