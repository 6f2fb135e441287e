// Package startpages unmaps the pages of a process's own executable that
// its start-up touched, once start-up is over. The orchestrator also calls
// it after its node's start-up has settled and after a wave of agents has
// left (package memtrim): work that ran once then, not again at idle.
//
// The resident size of a Go process counts every page of its binary that
// it has mapped, and the kernel maps file pages 64 KB at a time around
// each fault (fault_around_bytes). Package initialisation runs code in
// nearly every linked package exactly once, so an idle agent or
// orchestrator keeps mapped several megabytes of code and tables it will
// not run again (docs/performance.md, "Idle memory"). Release asks the
// kernel to drop this process's mappings of the binary's read-only
// segments (madvise(2) MADV_DONTNEED): the pages stay in the page cache,
// shared with every other process of the same binary, until the kernel
// reclaims them like any unmapped file page, and whatever the process
// runs afterwards is faulted back in, so the resident size settles at what
// the process actually uses. Only the resident size changes: a memory
// cgroup charges page cache to the group that read it, mapped or not.
//
// Only read-only mappings of the executable that hold no page of the
// process's own, in memory or swapped out, are touched (code, read-only
// data, the function tables): for a private file mapping that was never
// written, dropping a page and faulting it back yields the same bytes.
// Writable mappings (data, BSS, the heap) and read-only ones that were
// written before being made read-only (the relocations of a
// position-independent binary) are never advised, because there
// MADV_DONTNEED would discard the process's own state.
package startpages

import (
	"errors"
	"log/slog"
)

// Stats says what Release did.
type Stats struct {
	// Mappings is the number of read-only mappings of the executable that
	// were advised.
	Mappings int
	// Bytes is the size of their address ranges, in bytes (not what was
	// resident, which the kernel does not report back).
	Bytes uint64
}

// ErrUnsupported is Release's error on systems other than Linux, which
// have no /proc/self/smaps to find the binary's mappings in.
var ErrUnsupported = errors.New("startpages: releasing the binary's pages is supported on Linux only")

// ReleaseLogged runs Release and says on log what came of it: what was
// released at debug level, or as a warning why nothing was (the process
// works the same, with a larger resident size); ErrUnsupported only at
// debug level. role names the binary in the messages ("agent",
// "orchestrator").
func ReleaseLogged(log *slog.Logger, role string) {
	s, err := Release()
	if errors.Is(err, ErrUnsupported) {
		log.Debug("start-up pages of the "+role+" binary left mapped", "err", err)
		return
	}
	if err == nil && s.Mappings == 0 {
		err = errors.New("no read-only mapping of the binary without written pages")
	}
	if err != nil {
		log.Warn("could not release the start-up pages of the "+role+" binary; its resident size stays larger", "err", err)
		return
	}
	log.Debug("released the start-up pages of the "+role+" binary", "mappings", s.Mappings, "bytes", s.Bytes)
}
