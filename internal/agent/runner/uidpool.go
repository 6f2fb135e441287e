package runner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultUIDRange is the uid range a root agent gives jobs from when
// KICI_STEP_UID_RANGE is unset: above the accounts of a usual host
// (login.defs UID_MAX 60000), systemd's dynamic users (61184–65519) and
// nobody (65534), below the subordinate ids useradd hands out (100000 on).
const DefaultUIDRange = "70000-79999"

// DefaultUIDLockDir holds one lock file per uid in use, shared by every
// agent of the host (they may use different work directories).
const DefaultUIDLockDir = "/run/kici/step-uids"

// UIDPool hands each job a uid (and the same gid) no other live job of the
// host has, like systemd's DynamicUser: a uid is taken by holding an
// exclusive flock on <LockDir>/<uid> for the job's life, so agents need not
// talk to each other and a uid is free again as soon as its holder ends,
// even when it is SIGKILLed. Uids that name an account or a group are
// skipped. Steps of a job then own nothing of any other job, and nothing
// the job leaves behind outside its work directory belongs to a later
// job's uid while the uid is not reused.
type UIDPool struct {
	// First and Last bound the range (inclusive).
	First, Last uint32
	// LockDir is the directory of lock files (DefaultUIDLockDir when "").
	LockDir string
}

// ParseUIDRange reads "first-last" (inclusive, first > 0, at most 1<<20
// uids); the error says what is wanted.
func ParseUIDRange(s string) (*UIDPool, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first || last-first >= 1<<20 {
		return nil, fmt.Errorf("uid range %q: want first-last, e.g. %s (first above 0, at most 1048576 uids)", s, DefaultUIDRange)
	}
	return &UIDPool{First: uint32(first), Last: uint32(last)}, nil
}

// String is the range as "first-last".
func (p *UIDPool) String() string { return fmt.Sprintf("%d-%d", p.First, p.Last) }

// Acquire takes a free uid and returns it as a step user (Name "") with
// the function that frees it again; every uid busy is an error.
func (p *UIDPool) Acquire() (*StepUser, func(), error) {
	dir := p.LockDir
	if dir == "" {
		dir = DefaultUIDLockDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("uid lock directory: %w", err)
	}
	n := uint64(p.Last-p.First) + 1
	start := rand.Uint64N(n) // spread agents over the range: fewer collisions
	for i := uint64(0); i < n; i++ {
		uid := p.First + uint32((start+i)%n)
		id := strconv.FormatUint(uint64(uid), 10)
		f, err := os.OpenFile(filepath.Join(dir, id), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("uid lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, nil, fmt.Errorf("uid lock: %w", err)
		}
		if _, err := user.LookupId(id); err == nil {
			f.Close()
			continue
		}
		if _, err := user.LookupGroupId(id); err == nil {
			f.Close()
			continue
		}
		return &StepUser{UID: uid, GID: uid}, func() { f.Close() }, nil
	}
	return nil, nil, fmt.Errorf("every uid of %s is in use by a running job or an account; widen KICI_STEP_UID_RANGE", p)
}
