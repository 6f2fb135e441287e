package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrStale is returned (wrapped) by Check when the committed lock file
// differs from a fresh compile of the workflows.
var ErrStale = errors.New("lock file is stale: run kici compile")

// ErrMissing is returned (wrapped) by Check when there is no lock file.
var ErrMissing = errors.New("lock file " + Path + " is missing: run kici compile")

// Check compiles the workflows under root and compares the result with
// root/.kici/kici.lock.json byte for byte. It returns nil when the lock is up
// to date, CompileErrors when a workflow is invalid, an error wrapping
// ErrMissing or ErrStale otherwise, or an I/O error.
func Check(root string) error {
	freshLF, fresh, err := CompileDir(root)
	if err != nil {
		return err
	}
	current, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(Path)))
	if err != nil {
		if os.IsNotExist(err) {
			return ErrMissing
		}
		return fmt.Errorf("read lock file: %w", err)
	}
	if !bytes.Equal(current, fresh) {
		if old, err := Parse(current); err == nil {
			if lines := PieceDrift(old, freshLF); len(lines) > 0 {
				return fmt.Errorf("%w\n%s", ErrStale, strings.Join(lines, "\n"))
			}
		}
		return ErrStale
	}
	return nil
}

// PieceDrift compares the pieces recorded in a committed lock with those of
// a fresh compile and describes each that changed: a library ref that now
// resolves to another commit, or a piece file whose content changed. The
// lines are sorted by workflow, then piece.
func PieceDrift(old, fresh *LockFile) []string {
	oldBy := map[string]PieceOrigin{}
	for _, wf := range old.Workflows {
		for _, p := range wf.Pieces {
			oldBy[wf.Name+"\x00"+p.Label()] = p
		}
	}
	var out []string
	for _, wf := range fresh.Workflows {
		for _, p := range wf.Pieces {
			o, ok := oldBy[wf.Name+"\x00"+p.Label()]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("workflow %q: piece %s is new since the lock was compiled", wf.Name, p.Label()))
			case p.Library != "" && o.Commit != p.Commit:
				out = append(out, fmt.Sprintf("workflow %q: library %s ref %s now resolves to %s; the lock has %s (piece %s)", wf.Name, p.Library, p.Ref, short(p.Commit), short(o.Commit), p.Label()))
			case o.ContentHash != p.ContentHash:
				out = append(out, fmt.Sprintf("workflow %q: piece %s changed since the lock was compiled", wf.Name, p.Label()))
			}
		}
	}
	return out
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// Write compiles the workflows under root and writes the lock file to
// root/.kici/kici.lock.json (mode 0644), replacing it atomically. It reports
// whether the file content changed.
func Write(root string) (*LockFile, bool, error) {
	lf, data, err := CompileDir(root)
	if err != nil {
		return nil, false, err
	}
	dst := filepath.Join(root, filepath.FromSlash(Path))
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return lf, false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".kici.lock.json.*")
	if err != nil {
		return nil, false, fmt.Errorf("write lock file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("write lock file: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("write lock file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("write lock file: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return nil, false, fmt.Errorf("write lock file: %w", err)
	}
	return lf, true, nil
}
