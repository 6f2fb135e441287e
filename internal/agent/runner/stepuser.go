package runner

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"kici.dev/kici/internal/agent/supervisor"
)

// StepUser is the unprivileged identity steps run as when the agent runs as
// root (a fixed account, or a uid of the job's own from a UIDPool): the
// job's work directory, HOME included, is handed to it, so a step can
// build and test but cannot read what only root may — the orchestrator's data
// directory (admin token, database, master key) and the /proc entries of
// root's processes (docs/trust-model.md).
type StepUser struct {
	// Name is the account name ("" for a bare numeric identity).
	Name string
	// UID and GID are the numeric identity steps get.
	UID, GID uint32
}

// String names the identity for logs: "kici-step (uid 999, gid 999)".
func (u *StepUser) String() string {
	name := u.Name
	if name == "" {
		name = "uid " + strconv.Itoa(int(u.UID))
		return fmt.Sprintf("%s (gid %d)", name, u.GID)
	}
	return fmt.Sprintf("%s (uid %d, gid %d)", name, u.UID, u.GID)
}

// credential is the SysProcAttr credential of a step process, with no
// supplementary groups (root's must not leak to the step).
func (u *StepUser) credential() *syscall.Credential {
	return supervisor.Credential(u.UID, u.GID)
}

// handOver makes paths (and, for directories, everything below them) owned
// by the step user. Symbolic links are re-owned themselves, never followed.
func (u *StepUser) handOver(paths ...string) error {
	return u.handOverExcept(nil, paths...)
}

// handOverExcept is handOver leaving the files named in keep as they are:
// files linked from the host mirror, which another name shares (re-owning
// one name re-owns the file, and the mirror's copy with it).
func (u *StepUser) handOverExcept(keep map[string]bool, paths ...string) error {
	for _, p := range paths {
		err := filepath.WalkDir(p, func(q string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if keep[q] {
				return nil
			}
			return os.Lchown(q, int(u.UID), int(u.GID))
		})
		if err != nil {
			return fmt.Errorf("hand %s to the step user: %w", p, err)
		}
	}
	return nil
}

// traversable makes dir searchable (but not listable) by other users, so a
// step user can reach its job directory below it (mode |= 0o011), and
// checks that every parent is searchable by others too: a work directory
// under a private parent would fail every step with "permission denied".
func traversable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&0o011 != 0o011 {
		if err := os.Chmod(dir, m|0o011); err != nil {
			return err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is below %s (mode %04o), which the step user cannot enter: make it searchable (chmod o+x) or choose another KICI_WORK_DIR", dir, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
