package orchestrator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dataDirLockFile is held (flock, exclusive) by the orchestrator that owns a
// data directory.
const dataDirLockFile = "orchestrator.lock"

// lockDataDir takes the data directory's exclusive lock so two orchestrators
// never share one data directory (they would fight over the endpoint file,
// the SQLite database and the agents' work directories). The lock is
// released when the returned file is closed or the process exits. Errors say
// which process holds it, when known.
func lockDataDir(dataDir string) (*os.File, error) {
	path := filepath.Join(dataDir, dataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w (is KICI_DATA_DIR writable?)", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			} else {
				who = "pid " + who
			}
			return nil, fmt.Errorf("data directory %s is in use by another kici-orchestrator (%s); stop it or set KICI_DATA_DIR to another directory", dataDir, who)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	return f, nil
}

// tightenDataDir makes the data directory private (mode 0700) when group or
// others may enter it: it holds the admin token, the database and the
// master key, and steps of bare-metal agents run on this host. kici.db and
// the log files are created with the default umask, so the directory's mode
// is what keeps them from other users, step users included.
func tightenDataDir(dataDir string) (changed bool, err error) {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return false, err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return false, nil
	}
	return true, os.Chmod(dataDir, 0o700)
}
