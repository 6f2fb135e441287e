package pgtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// initdbArgs are the options of the throwaway cluster (after -D data).
var initdbArgs = []string{"-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"}

// initCluster makes data (inside dir) a freshly initialised cluster. initdb
// takes seconds, and its output depends only on the binaries and options:
// the first run keeps a pristine copy of the cluster under the user cache
// directory, and later runs copy that (ownership and modes kept) instead.
// Any trouble with the cache falls back to a plain initdb.
func initCluster(bin, dir, data string, cred *syscall.Credential) error {
	cached := clusterCachePath(bin)
	if cached != "" {
		if _, err := os.Stat(filepath.Join(cached, "PG_VERSION")); err == nil {
			if err := exec.Command("cp", "-a", cached, data).Run(); err == nil {
				return nil
			}
			os.RemoveAll(data)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), append([]string{"-D", data}, initdbArgs...)...)
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if cached != "" {
		keepClusterCopy(data, cached)
	}
	return nil
}

// clusterCachePath names the cached cluster for the binaries in bin (their
// path, size and modification time) and initdbArgs, or "" when there is no
// user cache directory.
func clusterCachePath(bin string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintln(h, bin, strings.Join(initdbArgs, " "), os.Geteuid())
	for _, b := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(bin, b))
		if err != nil {
			return ""
		}
		fmt.Fprintln(h, b, fi.Size(), fi.ModTime().UnixNano())
	}
	return filepath.Join(base, "kici-pgtest", hex.EncodeToString(h.Sum(nil))[:16], "data")
}

// keepClusterCopy copies the pristine cluster data to cached, atomically
// (a copy beside it, then a rename), best effort.
func keepClusterCopy(data, cached string) {
	parent := filepath.Dir(cached)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return
	}
	tmp, err := os.MkdirTemp(parent, "tmp-")
	if err != nil {
		return
	}
	defer os.RemoveAll(tmp)
	copyPath := filepath.Join(tmp, "data")
	if err := exec.Command("cp", "-a", data, copyPath).Run(); err != nil {
		return
	}
	_ = os.Rename(copyPath, cached) // fails harmlessly when another run got there first
}
