package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kici.dev/kici/internal/lockfile"
)

// maxRetryDelay bounds an uncapped exponential backoff.
const maxRetryDelay = 24 * time.Hour

// RetryDelay returns how long to wait after failed attempt n (1-based)
// before the next one: DelayMs for "fixed", DelayMs·2^(n-1) for
// "exponential" (also the default when Backoff is empty), capped at
// MaxDelayMs when that is positive (and at 24 h in any case). A nil policy waits 0.
func RetryDelay(r *lockfile.Retry, attempt int) time.Duration {
	if r == nil || r.DelayMs <= 0 {
		return 0
	}
	if attempt < 1 {
		attempt = 1
	}
	d := r.DelayMs
	if r.Backoff != "fixed" {
		for i := 1; i < attempt; i++ {
			d *= 2
			if r.MaxDelayMs > 0 && d >= r.MaxDelayMs || d > int64(maxRetryDelay/time.Millisecond) {
				break
			}
		}
	}
	if r.MaxDelayMs > 0 && d > r.MaxDelayMs {
		d = r.MaxDelayMs
	}
	if limit := int64(maxRetryDelay / time.Millisecond); d > limit {
		d = limit
	}
	return time.Duration(d) * time.Millisecond
}

// MaxAttempts is the number of attempts a step gets (at least 1).
func MaxAttempts(r *lockfile.Retry) int {
	if r == nil || r.MaxAttempts < 1 {
		return 1
	}
	return r.MaxAttempts
}

// ResolveWorkingDir returns the directory a step runs in: root joined with
// rel. rel must be relative and stay inside root, also after resolving
// symbolic links; the directory must exist. An empty rel means root.
func ResolveWorkingDir(root, rel string) (string, error) {
	if rel == "" || rel == "." {
		return root, nil
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) {
		return "", fmt.Errorf("workingDirectory %q must be relative to the checkout", rel)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("workingDirectory %q escapes the checkout", rel)
	}
	dir := filepath.Join(root, clean)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workingDirectory: %w", err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("workingDirectory %q does not exist in the checkout", rel)
		}
		return "", fmt.Errorf("workingDirectory %q: %w", rel, err)
	}
	if realDir != realRoot && !strings.HasPrefix(realDir, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("workingDirectory %q escapes the checkout through a symbolic link", rel)
	}
	st, err := os.Stat(realDir)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("workingDirectory %q is not a directory", rel)
	}
	return dir, nil
}

// ShellArgv returns the command line for a step script: bash (the default)
// runs `bash --noprofile --norc -eo pipefail <file>`, sh runs `sh -e <file>`.
func ShellArgv(shell, scriptFile string) ([]string, error) {
	switch shell {
	case "", "bash":
		return []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", scriptFile}, nil
	case "sh":
		return []string{"sh", "-e", scriptFile}, nil
	default:
		return nil, fmt.Errorf("unsupported shell %q (want bash or sh)", shell)
	}
}

// removeAll removes dir even when a step left read-only directories in
// it. os.RemoveAll never follows a link; when it fails, the directories
// are made writable (makeWritable, which never leaves the tree) and it is
// tried again. Root usually needs no write bits, but a root agent without
// CAP_DAC_OVERRIDE (a container with its capabilities dropped) does.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	makeWritable(dir)
	return os.RemoveAll(dir)
}

// makeWritable gives every directory of the tree at dir mode 0700,
// resolving every path within the tree (os.Root): a process a job left
// behind may swap a directory for a link to a host path between the walk
// listing it and the chmod, and a path through such a link is refused,
// not followed. dir itself is changed through its parent, the work root,
// which steps cannot write.
func makeWritable(dir string) {
	if parent, err := os.OpenRoot(filepath.Dir(dir)); err == nil {
		_ = parent.Chmod(filepath.Base(dir), 0o700)
		parent.Close()
	}
	tree, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer tree.Close()
	_ = fs.WalkDir(tree.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != "." {
			beforeChmod(p)
			_ = tree.Chmod(p, 0o700)
		}
		return nil
	})
}

// beforeChmod runs between makeWritable's listing of a directory and its
// chmod; tests use it to swap the directory for a link there.
var beforeChmod = func(string) {}
