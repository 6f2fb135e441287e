// Package local is the provider for repositories on the orchestrator's own
// host (source provider "local"): it reads the lock file at a commit,
// computes a push's changed files and turns the push payload posted by
// `kici-admin source trigger-local` into a normalized trigger event.
//
// Every git invocation is `git -C <path> <args…>` executed directly (never
// through a shell), with commit ids validated as 40 hex digits, refs refused
// when they start with '-', a context deadline, and the caller's GIT_DIR-like
// environment variables removed so the repository at <path> is the one used.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/lockfile"
)

// ZeroSHA is the all-zero commit id a push uses for "no commit" (branch
// creation in `before`, branch deletion in `after`).
const ZeroSHA = "0000000000000000000000000000000000000000"

// DefaultTimeout bounds one git invocation when the context has no earlier
// deadline.
const DefaultTimeout = 30 * time.Second

// MaxLockBytes caps the lock file read from a commit (KiCI
// KICI_LOCK_FILE_MAX_BYTES default, 5 MiB).
const MaxLockBytes = 5 << 20

// maxOutput caps any other git output read into memory.
const maxOutput = 64 << 20

// Errors returned (wrapped) by Repo methods.
var (
	// ErrLockNotFound: the commit has no .kici/kici.lock.json.
	ErrLockNotFound = errors.New("local: no lock file at commit")
	// ErrCommitNotFound: the commit id does not name a commit in the repository.
	ErrCommitNotFound = errors.New("local: commit not found")
	// ErrInvalidSHA: not a 40-hex-digit commit id.
	ErrInvalidSHA = errors.New("local: invalid commit id")
	// ErrInvalidRef: an empty ref, one starting with '-', or one with control
	// characters.
	ErrInvalidRef = errors.New("local: invalid ref")
)

// IsSHA reports whether s is a full 40-hex-digit commit id (either case).
func IsSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// IsZeroSHA reports whether s is empty or ZeroSHA.
func IsZeroSHA(s string) bool { return s == "" || s == ZeroSHA }

// Repo is a git repository on the local filesystem.
type Repo struct {
	path string
	// mu guards cat, the long-lived object reader (catfile.go).
	mu  sync.Mutex
	cat *catFile
	// Timeout bounds each git invocation (DefaultTimeout when zero).
	Timeout time.Duration
}

// Open returns the repository at path, which must be an absolute path to an
// existing directory. It does not run git.
func Open(path string) (*Repo, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("local: repository path %q is not absolute", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("local: repository: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: repository path %q is not a directory", path)
	}
	return &Repo{path: filepath.Clean(path)}, nil
}

// Path returns the repository's absolute path.
func (r *Repo) Path() string { return r.path }

// gitEnvBlocklist names environment variables that would redirect git away
// from the repository given with -C (set, for instance, inside a git hook).
var gitEnvBlocklist = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
	"GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true, "GIT_EXTERNAL_DIFF": true,
	"GIT_CONFIG": true, "GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
}

func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if gitEnvBlocklist[k] || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}

// gitError is a failed git invocation with its exit code and stderr.
type gitError struct {
	args   []string
	code   int
	stderr string
	err    error
}

// Error renders the git command and its stderr.
func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

// Unwrap returns the exec error.
func (e *gitError) Unwrap() error { return e.err }

type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

// Write buffers p, failing once the limit would be exceeded.
func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.limit - l.buf.Len(); len(p) > room {
		l.over = true
		if room > 0 {
			l.buf.Write(p[:room])
		}
		return 0, io.ErrShortWrite
	}
	return l.buf.Write(p)
}

// git runs `git -C <path> -c core.fsmonitor=false <args…>` and returns stdout
// (at most limit bytes; more is an error).
func (r *Repo) git(ctx context.Context, limit int, args ...string) ([]byte, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"-C", r.path, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = gitEnv()
	cmd.Stdin = nil
	out := &limitedBuffer{limit: limit}
	errBuf := &limitedBuffer{limit: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, errBuf
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if out.over {
		return nil, fmt.Errorf("git %s: output larger than %d bytes", strings.Join(args, " "), limit)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), ctx.Err())
		}
		ge := &gitError{args: args, stderr: errBuf.buf.String(), err: err}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ge.code = ee.ExitCode()
		}
		return nil, ge
	}
	return out.buf.Bytes(), nil
}

// exitCode returns the exit code of a failed git invocation, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) && ge.code > 0 {
		return ge.code
	}
	return -1
}

// ResolveCommit resolves ref (a branch, tag, "HEAD", or commit id) to the
// full lower-case commit id via `git rev-parse --verify --end-of-options
// <ref>^{commit}`. Errors: ErrInvalidRef, ErrCommitNotFound, git failures.
func (r *Repo) ResolveCommit(ctx context.Context, ref string) (string, error) {
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsFunc(ref, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		return "", fmt.Errorf("%w: %q", ErrInvalidRef, ref)
	}
	out, err := r.git(ctx, 4096, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 || exitCode(err) == 128 {
			return "", fmt.Errorf("%w: %q", ErrCommitNotFound, ref)
		}
		return "", err
	}
	sha := strings.TrimSpace(string(out))
	if !IsSHA(sha) {
		return "", fmt.Errorf("local: rev-parse %q returned %q", ref, sha)
	}
	return strings.ToLower(sha), nil
}

// checkSHA validates sha and confirms the commit exists.
func (r *Repo) checkSHA(ctx context.Context, sha string) (string, error) {
	if !IsSHA(sha) {
		return "", fmt.Errorf("%w: %q", ErrInvalidSHA, sha)
	}
	sha = strings.ToLower(sha)
	if _, _, err := r.object(ctx, sha+"^{commit}", 0, false); err != nil {
		if errors.Is(err, errObjectMissing) {
			return "", fmt.Errorf("%w: %s", ErrCommitNotFound, sha)
		}
		return "", err
	}
	return sha, nil
}

// ReadLock returns the bytes of .kici/kici.lock.json at commit sha
// (one long-lived `git cat-file --batch` per repository, see catfile.go). Errors: ErrInvalidSHA,
// ErrCommitNotFound, ErrLockNotFound (the commit has no lock file, or the
// path is not a regular file), a lock over MaxLockBytes, git failures.
func (r *Repo) ReadLock(ctx context.Context, sha string) ([]byte, error) {
	sha, err := r.checkSHA(ctx, sha)
	if err != nil {
		return nil, err
	}
	typ, data, err := r.object(ctx, sha+":"+lockfile.Path, MaxLockBytes, true)
	switch {
	case errors.Is(err, errObjectMissing):
		return nil, fmt.Errorf("%w %s", ErrLockNotFound, sha)
	case errors.Is(err, errObjectTooLarge):
		return nil, fmt.Errorf("local: read lock at %s: %s is larger than %d bytes", sha, lockfile.Path, MaxLockBytes)
	case err != nil:
		return nil, fmt.Errorf("local: read lock at %s: %w", sha, err)
	case typ != "blob":
		return nil, fmt.Errorf("%w %s (%s is not a file)", ErrLockNotFound, sha, lockfile.Path)
	}
	return data, nil
}

// ChangedFiles returns the paths changed between two commits, as `git diff
// --name-only -z --no-renames before after` lists them (deleted files
// included, sorted by git). KiCI semantics: a zero or empty before (branch
// creation) or a zero after (branch deletion) yields an empty list, so
// path-filtered push triggers do not fire. Errors: ErrInvalidSHA,
// ErrCommitNotFound, git failures.
func (r *Repo) ChangedFiles(ctx context.Context, before, after string) ([]string, error) {
	if IsZeroSHA(before) || IsZeroSHA(after) {
		return []string{}, nil
	}
	before, err := r.checkSHA(ctx, before)
	if err != nil {
		return nil, err
	}
	after, err = r.checkSHA(ctx, after)
	if err != nil {
		return nil, err
	}
	out, err := r.git(ctx, maxOutput, "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--name-only", "-z", before, after, "--")
	if err != nil {
		return nil, fmt.Errorf("local: changed files %s..%s: %w", before[:12], after[:12], err)
	}
	files := []string{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}
