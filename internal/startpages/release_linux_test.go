//go:build linux

package startpages

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadOnlyRangesPicksTheExecutablesReadOnlyMappings(t *testing.T) {
	// Shaped like /proc/self/maps of a Go binary (inode 1234 on fd:01),
	// with a library, a writable data segment, anonymous memory, a file of
	// the same name on another device and the binary deleted on disk.
	maps := `00400000-00c00000 r-xp 00000000 fd:01 1234                       /usr/bin/kici-agent
00c00000-01600000 r--p 00800000 fd:01 1234                       /usr/bin/kici-agent
01600000-01650000 rw-p 01200000 fd:01 1234                       /usr/bin/kici-agent
01650000-01690000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r-xp 00000000 fd:01 99                         /usr/lib/libc.so.6
7f0000200000-7f0000300000 r--p 00000000 08:02 1234                       /usr/bin/kici-agent
7f0000400000-7f0000500000 r--p 00000000 fd:01 1234                       /usr/bin/kici-agent (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
`
	got, err := readOnlyRanges(strings.NewReader(maps), 1234, 0xfd, 0x01)
	if err != nil {
		t.Fatal(err)
	}
	want := []addrRange{{0x400000, 0xc00000}, {0xc00000, 0x1600000}, {0x7f0000400000, 0x7f0000500000}}
	if len(got) != len(want) {
		t.Fatalf("ranges = %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("range %d = %x, want %x", i, got[i], want[i])
		}
	}
}

func TestReadOnlyRangesRefusesAMalformedRange(t *testing.T) {
	for _, line := range []string{
		"zz-00c00000 r-xp 00000000 fd:01 1234 /bin/x",
		"00c00000-00400000 r-xp 00000000 fd:01 1234 /bin/x",
		"00400000 r-xp 00000000 fd:01 1234 /bin/x",
	} {
		if _, err := readOnlyRanges(strings.NewReader(line+"\n"), 1234, 0xfd, 1); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// TestReleaseDropsTheBinarysResidentPages runs Release in the test binary
// itself: the resident size of its read-only mappings, read from
// /proc/self/smaps as ps and the bench read it, falls, and the process
// goes on running code from those pages.
func TestReleaseDropsTheBinarysResidentPages(t *testing.T) {
	buf := make([]byte, 4<<20)
	before := exeReadOnlyRSSKB(t, smaps(t, buf))
	if before < 512 {
		t.Fatalf("the test binary's read-only mappings hold %d KB before Release; expected start-up to have touched more", before)
	}
	s, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if s.Mappings < 2 || s.Bytes == 0 {
		t.Fatalf("Release advised %d mappings, %d bytes; want the code and read-only data at least", s.Mappings, s.Bytes)
	}
	after := exeReadOnlyRSSKB(t, smaps(t, buf))
	if after*2 > before {
		t.Fatalf("resident read-only pages of the binary: %d KB before, %d KB after Release; want under half", before, after)
	}
	t.Logf("resident read-only pages of the binary: %d KB → %d KB (%d mappings, %d MB of address space)", before, after, s.Mappings, s.Bytes>>20)
	// Code and tables come back on use: a fresh parse of maps still works.
	if again := exeReadOnlyRSSKB(t, smaps(t, buf)); again == 0 {
		t.Fatal("no page of the binary resident after running code from it")
	}
}

// smaps reads /proc/self/smaps into buf with bare system calls, so that
// the snapshot is taken before the code that parses it runs (and faults
// its pages back in).
func smaps(t *testing.T, buf []byte) []byte {
	fd, err := syscall.Open("/proc/self/smaps", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	syscall.Close(fd)
	if n == len(buf) {
		t.Fatal("smaps larger than the buffer")
	}
	return append([]byte(nil), buf[:n]...)
}

// exeReadOnlyRSSKB sums the Rss lines of a /proc/self/smaps snapshot over
// the executable's read-only mappings, KiB.
func exeReadOnlyRSSKB(t *testing.T, snapshot []byte) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	total, inExe := 0, false
	sc := bufio.NewScanner(bytes.NewReader(snapshot))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			ino, _ := strconv.ParseUint(fields[4], 10, 64)
			maj, mnr, ok := parseDev(fields[3])
			inExe = ok && ino == st.Ino && maj == unix.Major(st.Dev) && mnr == unix.Minor(st.Dev) && fields[1][1] != 'w'
			continue
		}
		if inExe && len(fields) == 3 && fields[0] == "Rss:" {
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			total += kb
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}
