package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	_, fresh, err := CompileDir(root)
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
		return ErrStale
	}
	return nil
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
