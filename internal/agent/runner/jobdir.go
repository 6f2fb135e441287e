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
	// Slot is Path's slot: 1 for the job's own name, 2 to jobDirSlots for
	// <name>-<slot>, 0 for a random name, whose reason Random gives.
	Slot   int
	Random string
	// Reclaimed says a directory that an ended job had left at Path was
	// moved aside before this one was made; when removing it failed,
	// Aside is where it stays (until the agent's next start sweeps the
	// work root: SweepWorkRoot) and AsideErr why.
	Reclaimed bool
	Aside     string
	AsideErr  error
	lock      *os.File
}

// release ends the directory's claim: the caller has removed it, or
// leaves it for the next job of its name to take back.
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
// (reclaimRuleOf, moveAsideIfLeft): it is then renamed aside and removed,
// and the name made anew. Otherwise the job takes the next slot
// (<name>-2, … <name>-8), and past those a random name (os.MkdirTemp).
// What no later job takes back (a random name, one that never runs
// again, what could not be removed) the agent's start does
// (SweepWorkRoot).
// Agents sharing root may call it at once: a flock on root orders their
// picks (lockClaim), so that none takes for a leftover a directory
// another has just made and not yet locked. Where flock does not work
// (some network file systems) nothing is locked or taken back: a job
// takes the first name that is free. Errors: root cannot be opened or
// written.
func makeJobDir(root string, d *protocol.JobDispatch) (*jobDir, error) {
	claim, locks, err := lockClaim(root)
	if err != nil {
		return nil, err
	}
	if claim == nil && locks { // held past claimWait: do not wait on it
		// Named so that no sweep takes it (ownName) in the moment between
		// its making and its lock, which the claim cannot order here.
		return randomJobDirAs(root, unclaimedJobDirPattern, "the work root's lock was held for "+claimWait.String()+" by something else", true)
	}
	rule := reclaimRule{}
	if claim != nil {
		rule = reclaimRuleOf(claim)
	}
	jd, aside, err := pickJobDir(root, jobDirName(d), rule, locks)
	if err == nil && jd == nil {
		// Made and locked with the claim held, so that no sweep
		// (SweepWorkRoot) takes it for a leftover before it is locked.
		jd, err = randomJobDir(root, "every name of this job is taken", locks)
	}
	if claim != nil {
		claim.Close()
	}
	if aside != nil {
		if rmErr := aside.remove(); rmErr != nil && jd != nil {
			jd.Aside, jd.AsideErr = aside.path, rmErr
		}
	}
	return jd, err
}

// pickJobDir makes (and with locks, locks) the first free slot of name
// under root, with the claim lock held; aside is a directory moved aside
// for the caller to remove once the claim is released; nil when every
// slot is taken.
func pickJobDir(root, name string, rule reclaimRule, locks bool) (*jobDir, *leftDir, error) {
	var aside *leftDir
	for slot := 1; slot <= jobDirSlots; slot++ {
		dir := filepath.Join(root, name)
		if slot > 1 {
			dir += "-" + strconv.Itoa(slot)
		}
		reclaimed := false
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) && rule.may && aside == nil {
			if aside = moveAsideIfLeft(dir, rule.anyOwner); aside != nil {
				reclaimed = true
				err = os.Mkdir(dir, 0o700)
			}
		}
		if errors.Is(err, fs.ErrExist) {
			continue // in use, or nothing this agent may take back
		}
		if err != nil {
			return nil, aside, err
		}
		jd := &jobDir{Path: dir, Slot: slot, Reclaimed: reclaimed}
		if locks {
			if jd.lock, err = lockDir(dir); err != nil {
				_ = os.Remove(dir)
				return nil, aside, err
			}
		}
		return jd, aside, nil
	}
	return nil, aside, nil
}

// reclaimRule is what an agent may take back in a work root: may, any
// directory of its own user; anyOwner, any directory at all.
type reclaimRule struct{ may, anyOwner bool }

// reclaimRuleOf reads the rule from the work root (open as root): when
// the agent's user owns it and nobody else can write it, only agents put
// anything there, so left directories may be taken back, whoever owns
// them for an agent running as root (a root agent hands each job's
// directory to the job's uid); in a sticky directory (/tmp), only the
// agent user's own, which nobody else can have renamed there; in any
// other, nothing.
func reclaimRuleOf(root *os.File) reclaimRule {
	fi, err := root.Stat()
	if err != nil {
		return reclaimRule{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch euid := os.Geteuid(); {
	case !ok:
		return reclaimRule{}
	case int(st.Uid) == euid && fi.Mode().Perm()&0o022 == 0:
		return reclaimRule{may: true, anyOwner: euid == 0}
	case fi.Mode()&os.ModeSticky != 0:
		return reclaimRule{may: true}
	}
	return reclaimRule{}
}

// leftDir is a directory an ended job left, to be removed, and the lock
// on it that keeps other agents from taking it or removing it at once.
type leftDir struct {
	path string // where it is now
	was  string // its name before it was moved aside; path if it was not
	lock *os.File
}

// remove removes the directory, then lets go of its lock.
func (l *leftDir) remove() error {
	defer l.lock.Close()
	return removeAll(l.path)
}

// takeIfLeft locks dir when it is a directory (never through a link)
// whose lock nobody holds, so no running job's, and which this agent may
// take back: its own user's, or anyone's with anyOwner. nil leaves it
// alone; fi is what was locked.
func takeIfLeft(dir string, anyOwner bool) (l *leftDir, fi os.FileInfo) {
	f, err := lockDir(dir)
	if err != nil {
		return nil, nil // a link, a file, unreadable, or a running job's
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || (!anyOwner && int(st.Uid) != os.Geteuid()) {
		f.Close()
		return nil, nil // another user's
	}
	return &leftDir{path: dir, was: dir, lock: f}, fi
}

// moveAsideIfLeft renames dir to <dir>.left-<hex> beside it when
// takeIfLeft takes it, and returns it still locked; nil leaves it alone.
// What was renamed is checked to be the directory that was locked, or
// nil is returned and it is left where it went.
func moveAsideIfLeft(dir string, anyOwner bool) *leftDir {
	l, fi := takeIfLeft(dir, anyOwner)
	if l == nil {
		return nil
	}
	l.path = dir + asideMark + randomSuffix()
	if os.Rename(dir, l.path) != nil {
		l.lock.Close()
		return nil
	}
	if moved, err := os.Lstat(l.path); err != nil || !os.SameFile(fi, moved) {
		l.lock.Close()
		return nil // swapped between the check and the rename: not removed
	}
	return l
}

// asideMark is what moveAsideIfLeft puts between a name and its random
// suffix (randomSuffix: 12 hex digits).
const asideMark = ".left-"

// isAside says whether name is one moveAsideIfLeft gives. A job's own
// name never is one: it ends in "-" and 8 hex digits, or in a slot.
func isAside(name string) bool {
	i := strings.LastIndex(name, asideMark)
	if i < 0 || len(name)-i-len(asideMark) != 12 {
		return false
	}
	_, err := hex.DecodeString(name[i+len(asideMark):])
	return err == nil
}

// lockClaim takes an exclusive flock on the work root itself (a lock
// file would be left in it), trying for up to claimWait. It returns the
// open root and locks true; nil and true when the lock stays held that
// long; nil and false when the file system does not support flock.
// Errors: root cannot be opened.
func lockClaim(root string) (claim *os.File, locks bool, err error) {
	// Unlike the names in it (lockDir), the root may be reached through a
	// link: it is the agent's configuration (/tmp is one on macOS).
	f, err := os.OpenFile(root, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, fmt.Errorf("job directory: %w", err)
	}
	deadline := time.Now().Add(claimWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, true, nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, false, nil // ENOLCK, EBADF on NFS: no locks at all
		case time.Now().After(deadline):
			f.Close()
			return nil, true, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockDir opens dir, a directory and never through a link, and takes the
// exclusive flock that marks it in use; an error when it is held.
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

// randomJobDirPrefix starts the name of a job directory of a random name
// (os.MkdirTemp adds digits): not "kici-job-<digits>", the form of earlier
// versions, which the start-up sweep leaves alone (ownName).
const randomJobDirPrefix = "kici-job-random-"

// randomJobDir is a directory of a random name under root, for a job
// that cannot have its own name (why says for the log), locked with
// locks.
func randomJobDir(root, why string, locks bool) (*jobDir, error) {
	return randomJobDirAs(root, randomJobDirPrefix, why, locks)
}

// unclaimedJobDirPattern names a random job directory made without the
// work root's claim (os.MkdirTemp's pattern): a form the start-up sweep
// does not take, so one a crashed job left stays until removed by hand.
const unclaimedJobDirPattern = "kici-job-random-*-unclaimed"

// randomJobDirAs is randomJobDir with the name made from pattern
// (os.MkdirTemp).
func randomJobDirAs(root, pattern, why string, locks bool) (*jobDir, error) {
	dir, err := os.MkdirTemp(root, pattern)
	if err != nil {
		return nil, err
	}
	jd := &jobDir{Path: dir, Random: why}
	if locks {
		if jd.lock, err = lockDir(dir); err != nil {
			_ = os.Remove(dir)
			return nil, err
		}
	}
	return jd, nil
}

// jobDirLine is the job log's line about its work directory: its name
// in the agent's work root, and why when it is not the job's own. The
// setup log is readable by anyone who can read the run, so it names no
// path of the host (as the checkout's "<host mirrors>"); steps see theirs.
func jobDirLine(jd *jobDir) string {
	const mayNotWork = ": caches that record absolute paths may not work here)"
	line := "Work directory <work root>/" + filepath.Base(jd.Path)
	switch {
	case jd.Slot == 0:
		line += " (a random name: " + jd.Random + mayNotWork
	case jd.Slot > 1:
		line += " (the job's own name is taken, by a run of the same job still at work or by something this agent may not remove" + mayNotWork
	case jd.Reclaimed:
		line += " (left there by an earlier run: moved aside and made anew)"
	}
	if jd.AsideErr != nil {
		line += "; what an earlier run left could not all be removed and stays at <work root>/" + filepath.Base(jd.Aside) + " (the agent's log has why)"
	}
	return line
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
