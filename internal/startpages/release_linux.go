//go:build linux

package startpages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Release drops this process's mappings of its executable's read-only
// segments, read from /proc/self/maps. It is safe to call at any time and
// from any goroutine; a page the process needs again is faulted back in
// from the page cache, which costs a minor fault per 64 KB window.
//
// Errors: reading /proc/self/exe or /proc/self/maps fails (no procfs), or
// madvise refuses a range (EINVAL for locked pages, after mlockall); the
// ranges before the failing one stay advised.
func Release() (Stats, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return Stats{}, fmt.Errorf("startpages: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return Stats{}, fmt.Errorf("startpages: %w", err)
	}
	defer f.Close()
	ranges, err := readOnlyRanges(f, st.Ino, unix.Major(st.Dev), unix.Minor(st.Dev))
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, r := range ranges {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_DONTNEED); errno != 0 {
			return s, fmt.Errorf("startpages: madvise %#x-%#x: %w", r.start, r.end, errno)
		}
		s.Mappings++
		s.Bytes += uint64(r.end - r.start)
	}
	return s, nil
}

// addrRange is one mapping's address range, [start, end).
type addrRange struct{ start, end uintptr }

// readOnlyRanges returns the mappings in maps (the format of
// /proc/<pid>/maps, proc(5)) that map the file with the given inode on
// the device major:minor and are not writable. The file is recognised by
// device and inode, not by path, so a binary replaced on disk while it
// runs ("(deleted)") is still recognised and another file of the same
// name is not.
func readOnlyRanges(maps io.Reader, inode uint64, major, minor uint32) ([]addrRange, error) {
	var out []addrRange
	sc := bufio.NewScanner(maps)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode [pathname]
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if ino, err := strconv.ParseUint(fields[4], 10, 64); err != nil || ino != inode {
			continue
		}
		if maj, mnr, ok := parseDev(fields[3]); !ok || maj != major || mnr != minor {
			continue
		}
		if perms := fields[1]; len(perms) < 2 || perms[1] == 'w' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("startpages: malformed address range %q", fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("startpages: malformed address range %q", fields[0])
		}
		out = append(out, addrRange{uintptr(start), uintptr(end)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("startpages: reading maps: %w", err)
	}
	return out, nil
}

// parseDev parses a maps device field, "major:minor" in hexadecimal.
func parseDev(s string) (major, minor uint32, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	ma, err1 := strconv.ParseUint(a, 16, 32)
	mi, err2 := strconv.ParseUint(b, 16, 32)
	return uint32(ma), uint32(mi), err1 == nil && err2 == nil
}
