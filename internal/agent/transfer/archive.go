// Package transfer is the agent side of job caches and artifacts: packing
// paths into a tar stream compressed with zstd, unpacking one safely, and
// streaming both to and from the orchestrator with the job's credential.
//
// An archive is a sequence of entries named "<index>/<path inside root
// index>": the index says which of the packed roots an entry belongs to, so
// an unpacked entry can only land inside the root the job declared, never
// elsewhere on the host. Regular files and directories are kept (with their
// permission bits), and so are symbolic links, as links (a virtualenv's
// bin/python, node_modules/.bin): Unpack never writes through a link, one
// in the archive or one already on disk, so an archive cannot plant a link
// that a later entry writes through. Special files are skipped.
package transfer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Root is one directory tree of an archive. Files, when not nil, limits
// the archive to those paths (slash-separated, relative to Dir); nil packs
// the whole tree. Base, when set, is the job directory Dir must lie in
// (its workspace, HOME or temporary directory): Pack and Unpack refuse a
// Dir outside it or reached through a symbolic link below it (CheckRoot),
// so a link a step planted cannot point a cache at the host.
type Root struct {
	Dir   string   `json:"dir"`
	Files []string `json:"files,omitempty"`
	Base  string   `json:"base,omitempty"`
}

// CheckRoot refuses r when Base is set and Dir is not inside it, or when a
// component between Base and Dir (Dir included) exists and is a symbolic
// link or not a directory. A component that does not exist yet is fine:
// Unpack creates it, Pack skips it.
func CheckRoot(r Root) error {
	if r.Base == "" {
		return nil
	}
	rel, err := filepath.Rel(r.Base, r.Dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return fmt.Errorf("%s is outside %s", r.Dir, r.Base)
	}
	cur := r.Base
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		cur = filepath.Join(cur, part)
		info, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case info.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; cache and artifact paths are not followed through links", cur)
		case !info.IsDir():
			return fmt.Errorf("%s exists and is not a directory", cur)
		}
	}
	return nil
}

// Stats counts what Pack or Unpack handled.
type Stats struct {
	Files   int
	Bytes   int64
	Skipped int // special files (devices, pipes, sockets)
}

// Pack writes roots as a zstd-compressed tar to w. A root that does not
// exist is skipped (a cache path the job never created).
func Pack(w io.Writer, roots []Root) (Stats, error) {
	var st Stats
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return st, err
	}
	tw := tar.NewWriter(zw)
	for i, r := range roots {
		if err := CheckRoot(r); err != nil {
			return st, err
		}
		prefix := strconv.Itoa(i)
		add := func(p string, d fs.DirEntry) error {
			rel, err := filepath.Rel(r.Dir, p)
			if err != nil {
				return err
			}
			name := prefix
			if rel != "." {
				name += "/" + filepath.ToSlash(rel)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case info.IsDir():
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()})
			case info.Mode().IsRegular():
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}); err != nil {
					return err
				}
				n, err := io.Copy(tw, f)
				st.Files++
				st.Bytes += n
				return err
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				st.Files++
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: info.ModTime()})
			default:
				st.Skipped++
				return nil
			}
		}
		if r.Files != nil {
			for _, rel := range r.Files {
				p := filepath.Join(r.Dir, filepath.FromSlash(rel))
				info, err := os.Lstat(p)
				if err != nil {
					return st, err
				}
				if err := add(p, fs.FileInfoToDirEntry(info)); err != nil {
					return st, fmt.Errorf("pack %s: %w", rel, err)
				}
			}
			continue
		}
		if _, err := os.Lstat(r.Dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := filepath.WalkDir(r.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return add(p, d)
		})
		if err != nil {
			return st, fmt.Errorf("pack %s: %w", r.Dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, zw.Close()
}

// Unpack extracts a Pack stream from r into roots (entry "<i>/…" goes
// under roots[i].Dir; Files is ignored). Every name is checked: no
// absolute paths, no "..", no index out of range, and no entry written
// through an existing symbolic link. Existing files are overwritten. It
// returns the paths it created that did not exist before (deepest last),
// so a caller can undo a failed restore with Undo.
func Unpack(r io.Reader, roots []Root) (Stats, []string, error) {
	var st Stats
	var created []string
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return st, nil, err
	}
	defer zr.Close()
	for _, root := range roots {
		if err := CheckRoot(root); err != nil {
			return st, nil, err
		}
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return st, created, nil
		}
		if err != nil {
			return st, created, err
		}
		idx, rel, _ := strings.Cut(strings.TrimSuffix(h.Name, "/"), "/")
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= len(roots) || strconv.Itoa(i) != idx {
			return st, created, fmt.Errorf("archive entry %q: not inside a declared path", h.Name)
		}
		if rel != "" && (path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../")) {
			return st, created, fmt.Errorf("archive entry %q: unsafe path", h.Name)
		}
		dst, err := safePath(roots[i].Dir, rel, &created)
		if err != nil {
			return st, created, fmt.Errorf("archive entry %q: %w", h.Name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdir(dst, &created); err != nil {
				return st, created, err
			}
		case tar.TypeReg:
			if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
				created = append(created, dst)
			}
			// O_NOFOLLOW: a symlink at dst itself is refused too.
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|oNoFollow, fs.FileMode(h.Mode).Perm()|0o200)
			if err != nil {
				return st, created, fmt.Errorf("archive entry %q: %w", h.Name, err)
			}
			n, err := io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return st, created, err
			}
			_ = os.Chtimes(dst, h.ModTime, h.ModTime)
			st.Files++
			st.Bytes += n
		case tar.TypeSymlink:
			if rel == "" || h.Linkname == "" || strings.ContainsRune(h.Linkname, 0) {
				return st, created, fmt.Errorf("archive entry %q: not a usable link", h.Name)
			}
			if err := replaceWithLink(dst, h.Linkname, &created); err != nil {
				return st, created, fmt.Errorf("archive entry %q: %w", h.Name, err)
			}
			st.Files++
		default:
			st.Skipped++
		}
	}
}

// replaceWithLink makes dst a symbolic link to target. A file or link
// already at dst is replaced (an older restore's), a directory is an error.
// The link itself is written, never followed: later entries below it are
// refused by safePath, and a file entry at its name by O_NOFOLLOW.
func replaceWithLink(dst, target string, created *[]string) error {
	info, err := os.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		*created = append(*created, dst)
	case err != nil:
		return err
	case info.IsDir():
		return fmt.Errorf("%s exists and is a directory", dst)
	default:
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	return os.Symlink(target, dst)
}

// safePath joins root and rel, creating the missing parent directories and
// refusing to pass through a symbolic link (root itself included).
func safePath(root, rel string, created *[]string) (string, error) {
	if err := mkdirRoot(root, created); err != nil {
		return "", err
	}
	cur := root
	if rel == "" {
		return cur, nil
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, p)
		if err := mkdir(cur, created); err != nil {
			return "", err
		}
	}
	return filepath.Join(cur, parts[len(parts)-1]), nil
}

// mkdirRoot makes a root directory. Its ancestors may be symbolic links
// (a home directory under a linked /home), the root itself may not: a
// checked-out repository could commit a link there.
func mkdirRoot(root string, created *[]string) error {
	info, err := os.Lstat(root)
	switch {
	case err == nil && info.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s exists and is not a directory", root)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// Record the ancestors MkdirAll creates, outermost first.
	var missing []string
	for d := filepath.Dir(root); d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	*created = append(*created, missing...)
	*created = append(*created, root)
	return nil
}

// mkdir makes dir (and its parents) unless it exists as a real directory;
// an existing symbolic link or file there is an error.
func mkdir(dir string, created *[]string) error {
	info, err := os.Lstat(dir)
	switch {
	case err == nil && info.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s exists and is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdir(parent, created); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	*created = append(*created, dir)
	return nil
}

// OpenNoFollow opens a file for reading unless it is a symbolic link
// (O_NOFOLLOW): the agent hashes workspace files for cache keys, and a link
// swapped in after the listing must not make it read a host file.
func OpenNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
}

// Undo removes paths created by a failed Unpack, deepest first.
func Undo(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = os.RemoveAll(created[i])
	}
}
