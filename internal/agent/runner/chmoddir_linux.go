package runner

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// chmodDir sets the mode of the directory at path, refusing a link (the
// error of open with O_NOFOLLOW): the directory is opened with O_PATH,
// which needs no permission on it (a step may have left it 0000), and
// changed through its descriptor's /proc/self/fd entry, so what is
// changed is the directory that was opened, whatever is at path by then.
func chmodDir(path string, mode os.FileMode) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return os.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}
