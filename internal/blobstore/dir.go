package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is the data-directory backend: each object is a file under
// <root>/objects/<key>. A Put writes <root>/tmp/<random> and renames it into
// place after an fsync, so a reader never sees a partial object and a cut
// or failed upload leaves nothing.
type Dir struct {
	root string
}

// NewDir returns a Dir rooted at root, creating it (mode 0700).
func NewDir(root string) (*Dir, error) {
	for _, d := range []string{filepath.Join(root, "objects"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blob directory: %w", err)
		}
	}
	return &Dir{root: root}, nil
}

// Kind is "dir".
func (d *Dir) Kind() string { return "dir" }

func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, "objects", filepath.FromSlash(key)), nil
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, limit int64) (Info, error) {
	dst, err := d.path(key)
	if err != nil {
		return Info{}, err
	}
	f, err := os.CreateTemp(filepath.Join(d.root, "tmp"), "put-*")
	if err != nil {
		return Info{}, err
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(tmp)
		}
	}()
	m := newMeter(ctxReader{ctx, r}, limit)
	if _, err := io.Copy(f, m); err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, err
	}
	if err := f.Close(); err != nil {
		return Info{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return Info{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Info{}, err
	}
	keep = true
	return m.info(key), nil
}

// Open implements Store.
func (d *Dir) Open(ctx context.Context, key, wantSHA256 string) (io.ReadCloser, error) {
	f, err := d.openFile(key)
	if err != nil {
		return nil, err
	}
	return verify(f, key, wantSHA256), nil
}

// openFile opens key's file; ErrNotFound when there is none.
func (d *Dir) openFile(key string) (*os.File, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return f, err
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
