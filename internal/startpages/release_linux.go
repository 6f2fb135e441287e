//go:build linux

package startpages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release drops this process's mappings of its executable's read-only
// segments that hold no page of the process's own, read from
// /proc/self/smaps. A page the process needs again is faulted back in
// from the page cache (or, if the kernel reclaimed it meanwhile, read from
// the binary), which costs a fault per 64 KB window.
//
// Errors: reading /proc/self/smaps fails (no procfs), the mapping holding
// this function's code is not found in it, or madvise refuses a range
// (EINVAL for locked pages, after mlockall); the ranges before the
// failing one stay advised.
func Release() (Stats, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Stats{}, fmt.Errorf("startpages: %w", err)
	}
	defer f.Close()
	ranges, err := releasable(f, reflect.ValueOf(Release).Pointer())
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

// vma is one mapping of /proc/<pid>/smaps (proc(5)): its header line's
// range, permissions and file, and its Anonymous and Swap fields.
type vma struct {
	addrRange
	perms      string
	dev, inode string
	writtenKB  int // Anonymous + Swap: pages of its own, in memory or swapped out
}

// releasable returns the mappings in smaps (the format of
// /proc/<pid>/smaps) that may be advised MADV_DONTNEED without losing
// anything: those of the file mapped at the address anchor (the
// executable, when anchor is one of its functions) that are not writable
// and hold no page of the process's own, in memory (Anonymous) or swapped
// out (Swap).
//
// The file is recognised by the device and inode the anchor's mapping
// shows, not by stat(2) of /proc/self/exe: before Linux 6.8 a file on
// overlayfs (a container's root) shows its backing file's numbers in
// smaps and the overlay's to stat. A read-only mapping with anonymous
// pages holds pages written after they were mapped: the relocated
// pointers of a position-independent or dynamically linked binary
// (.data.rel.ro and the GOT, written by the loader, then made read-only)
// or a debugger's breakpoint. Dropping those would put the file's bytes
// back in their place, so such a mapping is never advised; a written page
// that was swapped out is counted under Swap, not Anonymous, so both are.
func releasable(smaps io.Reader, anchor uintptr) ([]addrRange, error) {
	var maps []vma
	sc := bufio.NewScanner(smaps)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// address perms offset dev inode [pathname]
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("startpages: malformed address range %q", fields[0])
			}
			maps = append(maps, vma{addrRange: addrRange{uintptr(start), uintptr(end)}, perms: fields[1], dev: fields[3], inode: fields[4]})
			continue
		}
		if (fields[0] == "Anonymous:" || fields[0] == "Swap:") && len(fields) >= 2 && len(maps) > 0 {
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				return nil, fmt.Errorf("startpages: malformed %s field %q", strings.TrimSuffix(fields[0], ":"), sc.Text())
			}
			maps[len(maps)-1].writtenKB += kb
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("startpages: reading smaps: %w", err)
	}
	var exe *vma
	for i := range maps {
		if maps[i].start <= anchor && anchor < maps[i].end {
			exe = &maps[i]
			break
		}
	}
	if exe == nil || exe.inode == "0" {
		return nil, fmt.Errorf("startpages: no file mapping holds address %#x", anchor)
	}
	var out []addrRange
	for _, m := range maps {
		if m.dev != exe.dev || m.inode != exe.inode || len(m.perms) < 2 || m.perms[1] == 'w' || m.writtenKB != 0 {
			continue
		}
		out = append(out, m.addrRange)
	}
	return out, nil
}
