package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Why a view of its own. Steps of concurrent jobs run on the same host;
// without a view of their own one job's step could list another's
// processes, read their /proc/<pid>/environ (its secrets) and walk its
// workspace through /proc/<pid>/cwd or plain paths. So before starting the
// step the supervisor, alone in its new mount and PID namespaces (the
// agent created them), builds the step's view the way bubblewrap does,
// changing nothing outside those namespaces:
//
//  1. every mount becomes private, so nothing below propagates to the host;
//  2. as root (SandboxFlag) every mount is remounted read-only: the job's
//     uid can then leave nothing behind in world-writable host directories
//     (/run/lock, /var/crash, …) for a later job to find;
//  3. /tmp, /var/tmp and /dev/shm become fresh empty tmpfs; the work root
//     (every job's work directory, home and the host's checkout mirrors)
//     and the orchestrator's data directory are covered with an empty
//     read-only tmpfs;
//  4. the job's own work directory (its workspace, HOME and TMPDIR), its
//     attestation socket directory and the agent's binary are bound back at
//     the same paths, from descriptors opened before step 3 hid them;
//  5. a fresh /proc shows only the processes of the step's PID namespace,
//     whose first process is the supervisor itself.
//
// The step then starts as the job's uid (SandboxFlag) or in a nested user
// namespace (NamespacesFlag) and holds no capability: it cannot undo any of
// it.

// enterView builds v in the supervisor's own mount namespace.
func enterView(v view) error {
	// The working directory (the step's, set by the agent) still points
	// into the host's mounts: enter it again through the view at the end.
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	binds, err := openBindSources(v)
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range binds {
			b.fd.Close()
		}
	}()
	if v.sandbox {
		if err := remountAllReadOnly(); err != nil {
			return err
		}
	}
	covered, err := cover(v)
	if err != nil {
		return err
	}
	for _, b := range binds {
		if err := b.mount(v.sandbox); err != nil {
			return err
		}
	}
	for _, p := range covered { // mount points made: now read-only
		if err := syscall.Mount("tmpfs", p, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY|hideFlags, ""); err != nil {
			return fmt.Errorf("hide %s: make it read-only: %w", p, err)
		}
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a fresh /proc: %w", err)
	}
	if err := os.Chdir(wd); err != nil {
		return fmt.Errorf("working directory %s in the view: %w", wd, err)
	}
	return nil
}

// hideFlags are the flags of the tmpfs that hide a directory.
const hideFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC

// bindSource is a path to bind back, opened before it was hidden.
type bindSource struct {
	path string
	fd   *os.File
	dir  bool
	ro   bool
}

func openBindSources(v view) ([]bindSource, error) {
	var out []bindSource
	add := func(paths []string, ro bool) error {
		for _, p := range paths {
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return fmt.Errorf("keep %s: %w", p, err)
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return fmt.Errorf("keep %s: %w", p, err)
			}
			out = append(out, bindSource{path: p, fd: f, dir: fi.IsDir(), ro: ro})
		}
		return nil
	}
	if err := add(v.bind, false); err != nil {
		return out, err
	}
	return out, add(v.robind, true)
}

// mount binds b back at its path, creating the mount point (in a tmpfs
// this supervisor just mounted) when it is gone.
func (b bindSource) mount(sandbox bool) error {
	if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
		return fmt.Errorf("keep %s: %w", b.path, err)
	}
	if b.dir {
		if err := os.Mkdir(b.path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("keep %s: %w", b.path, err)
		}
	} else if f, err := os.OpenFile(b.path, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
		f.Close()
	} else {
		return fmt.Errorf("keep %s: %w", b.path, err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(b.fd.Fd()))
	if err := syscall.Mount(src, b.path, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("keep %s: %w", b.path, err)
	}
	if !sandbox { // a user namespace cannot change its inherited flags
		return nil
	}
	// The bind copies the flags of the read-only mount it came from.
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_NOSUID | syscall.MS_NODEV)
	if b.ro {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("", b.path, "", flags, ""); err != nil {
		return fmt.Errorf("keep %s: set its flags: %w", b.path, err)
	}
	return nil
}

// cover mounts the fresh tmpfs and the hiding tmpfs, shortest path first
// (a path below one covered already is gone and skipped), and returns the
// hiding ones, still writable so mount points can be made in them.
func cover(v view) ([]string, error) {
	type entry struct {
		path string
		tmp  bool
	}
	var all []entry
	for _, p := range v.tmpfs {
		all = append(all, entry{p, true})
	}
	for _, p := range v.hide {
		all = append(all, entry{p, false})
	}
	sort.SliceStable(all, func(i, k int) bool { return len(all[i].path) < len(all[k].path) })
	var hidden []string
	for _, e := range all {
		fi, err := os.Stat(e.path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", e.path, err)
		}
		switch {
		case e.tmp:
			err = syscall.Mount("tmpfs", e.path, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777")
		case fi.IsDir():
			err = syscall.Mount("tmpfs", e.path, "tmpfs", hideFlags, "size=64k,mode=0755")
			hidden = append(hidden, e.path)
		default:
			err = syscall.Mount("/dev/null", e.path, "", syscall.MS_BIND, "")
		}
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", e.path, err)
		}
	}
	return hidden, nil
}

// mountFlags maps the per-mount options of /proc/self/mountinfo to the
// flags a bind remount must repeat to keep them.
var mountFlags = map[string]uintptr{
	"nosuid": syscall.MS_NOSUID, "nodev": syscall.MS_NODEV, "noexec": syscall.MS_NOEXEC,
	"noatime": syscall.MS_NOATIME, "nodiratime": syscall.MS_NODIRATIME,
	"relatime": syscall.MS_RELATIME, "strictatime": syscall.MS_STRICTATIME,
}

// remountAllReadOnly remounts every mount of this namespace read-only,
// keeping its other flags. A mount point that is gone or hidden below
// another mount is skipped: nothing can reach it.
func remountAllReadOnly() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("read-only host: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		point, opts := unescapeMountinfo(fields[4]), strings.Split(fields[5], ",")
		if seen[point] {
			continue
		}
		seen[point] = true
		flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY)
		for _, o := range opts {
			flags |= mountFlags[o]
		}
		err := syscall.Mount("", point, "", flags, "")
		if err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EACCES) {
			return fmt.Errorf("read-only host: remount %s: %w", point, err)
		}
	}
	return sc.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a
// mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
