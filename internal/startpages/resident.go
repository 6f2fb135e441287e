package startpages

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Resident is a process's resident size and its two parts, in KiB, as
// /proc/<pid>/status reports them (proc(5)).
type Resident struct {
	// Total is VmRSS: every page the process has mapped that is in memory.
	Total int
	// Anon is RssAnon: memory of the process's own (heap, stacks, written
	// pages), what it costs on its own.
	Anon int
	// File is RssFile: pages of its binary and other files, clean, shared
	// with every process mapping the same file, and reclaimable.
	File int
}

// ResidentOf reads pid's Resident from /proc/<pid>/status. Errors: the
// file cannot be read (no such process, no procfs), it has no VmRSS line
// (a process that has exited but is not yet reaped, or a kernel thread),
// or a field is not a number.
func ResidentOf(pid int) (Resident, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Resident{}, fmt.Errorf("startpages: %w", err)
	}
	var r Resident
	fields := map[string]*int{"VmRSS:": &r.Total, "RssAnon:": &r.Anon, "RssFile:": &r.File}
	hasRSS := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || fields[f[0]] == nil {
			continue
		}
		hasRSS = hasRSS || f[0] == "VmRSS:"
		if *fields[f[0]], err = strconv.Atoi(f[1]); err != nil {
			return Resident{}, fmt.Errorf("startpages: /proc/%d/status: %s %q is not a number", pid, f[0], f[1])
		}
	}
	if !hasRSS {
		return Resident{}, fmt.Errorf("startpages: /proc/%d/status has no VmRSS: the process has exited (not yet reaped) or is a kernel thread", pid)
	}
	return r, nil
}
