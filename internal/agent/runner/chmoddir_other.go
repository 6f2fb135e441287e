//go:build !linux

package runner

import (
	"fmt"
	"os"
)

// chmodDir sets the mode of the directory at path, refusing a link. Away
// from Linux the check and the change are two calls, so a link swapped in
// between is followed; agents that remove other users' files run on Linux.
func chmodDir(path string, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("chmod %s: not a directory", path)
	}
	return os.Chmod(path, mode)
}
