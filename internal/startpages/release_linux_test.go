//go:build linux

package startpages

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// smapsFixture is shaped like /proc/self/smaps of a position-independent
// binary (inode 1234 on fd:01): code, read-only data, the relocated
// read-only data the loader wrote (anonymous pages), another such mapping
// whose written pages were swapped out, writable data, a library,
// anonymous memory, a file with the same inode on another device, the
// binary deleted on disk while it runs (a pathname with spaces), and
// VmFlags lines. Addresses fit 32 bits.
const smapsFixture = `00400000-00c00000 r-xp 00000000 fd:01 1234                       /usr/bin/kici-agent
Rss:                2048 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me
00c00000-01600000 r--p 00800000 fd:01 1234                       /usr/bin/kici-agent
Anonymous:             0 kB
Swap:                  0 kB
01600000-01610000 r--p 01200000 fd:01 1234                       /usr/bin/kici-agent
Anonymous:            64 kB
Swap:                  0 kB
01610000-01620000 r--p 01210000 fd:01 1234                       /usr/bin/kici-agent
Anonymous:             0 kB
Swap:                 64 kB
01620000-01650000 rw-p 01220000 fd:01 1234                       /usr/bin/kici-agent
Anonymous:           192 kB
01650000-01690000 rw-p 00000000 00:00 0
Anonymous:           256 kB
b7000000-b7100000 r-xp 00000000 fd:01 99                         /usr/lib/libc.so.6
Anonymous:             0 kB
b7200000-b7300000 r--p 00000000 08:02 1234                       /usr/bin/kici-agent
Anonymous:             0 kB
b7400000-b7500000 r--p 00000000 fd:01 1234                       /usr/bin/kici agent (deleted)
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd mr mw me
bffd0000-bffd2000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
`

func TestReleasableKeepsWrittenAndForeignMappings(t *testing.T) {
	got, err := releasable(strings.NewReader(smapsFixture), 0x401234)
	if err != nil {
		t.Fatal(err)
	}
	want := []addrRange{{0x400000, 0xc00000}, {0xc00000, 0x1600000}, {0xb7400000, 0xb7500000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges = %x, want %x (code, read-only data and the deleted binary's; not the relocated pages, in memory or swapped out, data, library, anonymous or other device)", got, want)
	}
}

func TestReleasableRefusesBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		smaps  string
		anchor uintptr
	}{
		"anchor in no mapping":        {smapsFixture, 0x10},
		"anchor in anonymous memory":  {smapsFixture, 0x1650000},
		"anchor in the vdso":          {smapsFixture, 0xbffd0100},
		"malformed range":             {"zz-00c00000 r-xp 00000000 fd:01 1234 /bin/x\n", 0x400000},
		"range ending before it ends": {"00c00000-00400000 r-xp 00000000 fd:01 1234 /bin/x\n", 0x400000},
		"malformed Anonymous":         {"00400000-00c00000 r-xp 00000000 fd:01 1234 /bin/x\nAnonymous: many kB\n", 0x400000},
		"malformed Swap":              {"00400000-00c00000 r-xp 00000000 fd:01 1234 /bin/x\nSwap: -\n", 0x400000},
	} {
		if got, err := releasable(strings.NewReader(c.smaps), c.anchor); err == nil {
			t.Errorf("%s: ranges %x, no error", name, got)
		}
	}
}

// TestReleaseDropsTheBinarysResidentPages runs Release in the test binary
// itself: the resident size of its read-only mappings, read from
// /proc/self/smaps as ps and the bench read it, falls.
func TestReleaseDropsTheBinarysResidentPages(t *testing.T) {
	// No collection between the readings: its stack scans would fault
	// the binary's tables back in.
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
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
	t.Logf("resident read-only pages of the binary: %d KB → %d KB (%d mappings, %d MB of address space)", before, after, s.Mappings, s.Bytes>>20)
	if after*2 > before {
		t.Fatalf("resident read-only pages of the binary: %d KB before, %d KB after Release; want under half", before, after)
	}
}

// TestReleaseInAPositionIndependentBinary builds a program as PIE, whose
// relocated read-only data the loader wrote, releases its pages and has it
// use those relocations afterwards: it must run to the end.
func TestReleaseInAPositionIndependentBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "releaseprog")
	build := exec.Command("go", "build", "-buildmode=pie", "-o", bin, "./testdata/releaseprog")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=pie: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("the PIE program failed after Release: %v\n%s", err, out)
	}
	if !strings.HasSuffix(string(out), "released RELEASED\n") || strings.HasPrefix(string(out), "mappings=0 ") {
		t.Fatalf("output %q: want at least one mapping released and the program's own output after it", out)
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
// the read-only mappings of the file that holds this package's code, KiB.
func exeReadOnlyRSSKB(t *testing.T, snapshot []byte) int {
	t.Helper()
	anchor := reflect.ValueOf(Release).Pointer()
	var exeDev, exeIno string
	type header struct{ dev, ino, perms string }
	var heads []header
	var rss []int
	sc := bufio.NewScanner(bytes.NewReader(snapshot))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, _ := strconv.ParseUint(lo, 16, 64)
			end, _ := strconv.ParseUint(hi, 16, 64)
			if uint64(anchor) >= start && uint64(anchor) < end {
				exeDev, exeIno = fields[3], fields[4]
			}
			heads = append(heads, header{fields[3], fields[4], fields[1]})
			rss = append(rss, 0)
			continue
		}
		if len(fields) == 3 && fields[0] == "Rss:" && len(rss) > 0 {
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			rss[len(rss)-1] = kb
		}
	}
	total := 0
	for i, h := range heads {
		if h.dev == exeDev && h.ino == exeIno && h.perms[1] != 'w' {
			total += rss[i]
		}
	}
	if exeIno == "" {
		t.Fatal("no mapping holds this package's code")
	}
	return total
}
