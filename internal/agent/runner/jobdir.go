package runner

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kici.dev/kici/internal/protocol"
)

// jobDirSlots is how many jobs of one identity (jobDirName) can run at
// once on one work root with a stable path each; a job beyond them gets a
// directory of a random name.
const jobDirSlots = 8

// claimWait bounds how long a job waits for the work root's flock (held
// for a few file-system calls by each job start, lockClaim); past it the
// job gets a directory of a random name rather than wait on whatever
// holds it.
const claimWait = 2 * time.Second

// jobDir is a job's work directory and the flock on it that marks it in
// use for the job's life.
type jobDir struct {
	// Path is the directory: new and empty, mode 0700.
	Path string
	// Reclaimed names a directory a job that ended without removing it had
	// left at Path (moved aside and removed before this one was made);
	// Slot is Path's slot, 1 for the job's first name, 0 for a random name.
	Reclaimed bool
	Slot      int
	lock      *os.File
}

// release ends the directory's claim: the caller has removed it, or
// leaves it to be reclaimed by the next job of its name.
func (d *jobDir) release() {
	if d.lock != nil {
		d.lock.Close()
	}
}

// makeJobDir creates the job's work directory under root, empty and new,
// at a path that is the same run after run for the same job of the same
// workflow and repository (jobDirName), so that what a cache restores
// keeps working where tools record absolute paths: a virtualenv's
// scripts name their interpreter by path, and Go keys a package compiled
// without -trimpath by its directory. GitLab Runner (builds/<runner>/
// <concurrent id>/<project>), Buildkite and GitHub Actions lay their
// builds out the same way.
//
// A job holds an exclusive flock on its directory for its life. A name
// that exists is used again only when it is a directory (never a link),
// nobody holds its lock (the job that made it ended without removing it:
// a crash, files it could not delete), and this agent may take it back
// (reclaimRoot, moveAsideIfLeft): it is then renamed aside and removed,
// and the name made anew. Otherwise the job takes the next slot (<name>-2, … <name>-8), and
// past those a random name (os.MkdirTemp). Agents sharing root may call
// it at once: a flock on root orders their picks (lockClaim), so that
// none takes for a leftover a directory another has just made and not
// yet locked. Errors: root cannot be opened or written.
func makeJobDir(root string, d *protocol.JobDispatch) (*jobDir, error) {
	claim, err := lockClaim(root)
	if err != nil {
		return nil, err
	}
	if claim == nil { // held past claimWait: do not wait on it
		return randomJobDir(root)
	}
	jd, aside, err := pickJobDir(root, jobDirName(d))
	claim.Close()
	if aside != "" {
		_ = removeAll(aside) // what it cannot remove stays aside, out of the name's way
	}
	if err != nil || jd != nil {
		return jd, err
	}
	return randomJobDir(root)
}

// pickJobDir makes and locks the first free slot of name under root,
// with the claim lock held; aside is a reclaimed directory for the caller
// to remove once the claim is released; nil, "" when every slot is taken.
func pickJobDir(root, name string) (*jobDir, string, error) {
	mayReclaim := reclaimRoot(root)
	for slot := 1; slot <= jobDirSlots; slot++ {
		dir := filepath.Join(root, name)
		if slot > 1 {
			dir += "-" + strconv.Itoa(slot)
		}
		aside := ""
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			if !mayReclaim {
				continue
			}
			if aside = moveAsideIfLeft(dir); aside == "" {
				continue // in use, or not a directory this agent may take back
			}
			err = os.Mkdir(dir, 0o700)
		}
		if err != nil {
			return nil, aside, err
		}
		lock, err := lockDir(dir)
		if err != nil {
			_ = os.Remove(dir)
			return nil, aside, err
		}
		return &jobDir{Path: dir, Slot: slot, Reclaimed: aside != "", lock: lock}, aside, nil
	}
	return nil, "", nil
}

// moveAsideIfLeft renames dir to a name of its own beside it and returns
// that name when dir is a directory whose lock nobody holds and which
// this process may remove (its own, or anything under a root only root
// can write when running as root); "" leaves it alone.
func moveAsideIfLeft(dir string) string {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "" // a link, a file, or unreadable: never followed
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || (int(st.Uid) != os.Geteuid() && os.Geteuid() != 0) {
		return "" // another user's
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return "" // a running job's
	}
	aside := dir + ".left-" + randomSuffix()
	if os.Rename(dir, aside) != nil {
		return ""
	}
	return aside
}

// reclaimRoot says whether left directories under root may be moved
// aside: always for an agent not running as root (it only touches its own
// user's, moveAsideIfLeft), and as root only when root is a directory
// that root owns and no other user can write, so that nothing in it was
// put there by anyone but an agent.
func reclaimRoot(root string) bool {
	if os.Geteuid() != 0 {
		return true
	}
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}

// lockClaim takes an exclusive flock on the work root itself (a lock
// file would be left in it), trying for up to claimWait; nil, nil when it
// stays held that long.
func lockClaim(root string) (*os.File, error) {
	f, err := os.OpenFile(root, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("job directory lock: %w", err)
	}
	deadline := time.Now().Add(claimWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("job directory lock: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockDir opens dir and takes the exclusive flock that marks it in use.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// randomJobDir is a directory of a random name under root, for a job
// that cannot have its own name.
func randomJobDir(root string) (*jobDir, error) {
	dir, err := os.MkdirTemp(root, "kici-job-")
	if err != nil {
		return nil, err
	}
	return &jobDir{Path: dir}, nil
}

// jobDirLine is the job log's line about its work directory: where it
// is, and why when it is not at the job's own name.
func jobDirLine(jd *jobDir) string {
	switch {
	case jd.Slot == 0:
		return "Work directory " + jd.Path + " (every name of this job is in use: caches that record absolute paths may not work here)"
	case jd.Slot > 1:
		return "Work directory " + jd.Path + " (the job's own name is taken, by a run of the same job still at work or by something else: caches that record absolute paths may not work here)"
	case jd.Reclaimed:
		return "Work directory " + jd.Path + " (left by an earlier run, removed and made anew)"
	}
	return "Work directory " + jd.Path
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// jobDirName is "kici-job-<job>-<hash>": the job's name made safe for a
// path (at most 16 bytes of [a-z0-9._-], for people reading the work
// root) and 8 hex digits of SHA-256 over the repository URL, workflow
// name, job name and matrix values (each key and value NUL-terminated),
// which tell jobs apart. It is kept short (at most 34 bytes, 36 with a
// slot; a random name has 19) because tools put unix sockets under HOME
// (gpg-agent's ~/.gnupg/S.gpg-agent.browser) and a socket's path has at
// most 107 bytes; two jobs whose names hash alike only share slots.
func jobDirName(d *protocol.JobDispatch) string {
	h := sha256.New()
	for _, part := range []string{d.RepoURL, d.WorkflowName, d.JobName} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	keys := make([]string, 0, len(d.MatrixValues))
	for k := range d.MatrixValues {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(d.MatrixValues[k]))
		h.Write([]byte{0})
	}
	return "kici-job-" + pathWord(d.JobName, 16) + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// pathWord lower-cases s and keeps ASCII letters and digits, '.', '_'
// and '-', turning each run of anything else into one '-', trimmed and
// cut to max bytes; "job" when nothing is left.
func pathWord(s string, max int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	w := strings.Trim(b.String(), "-.")
	if len(w) > max {
		w = strings.Trim(w[:max], "-.")
	}
	if w == "" {
		return "job"
	}
	return w
}
