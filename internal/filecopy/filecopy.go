// Package filecopy copies a file into a new file that nobody else can have
// opened first: the destination is created exclusively, so a copy never
// overwrites an existing file or follows a link planted in its place.
package filecopy

import (
	"io"
	"os"
)

// ToNew copies src to dst, which it creates with mode perm (before the
// umask) and O_EXCL. Errors: src unreadable, dst already existing (a
// *PathError wrapping os.ErrExist), or the copy failing; a failed copy
// leaves dst behind, partial, for the caller to remove.
func ToNew(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
