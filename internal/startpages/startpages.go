// Package startpages unmaps the pages of a process's own executable that
// its start-up touched, once start-up is over.
//
// The resident size of a Go process counts every page of its binary that
// it has mapped, and the kernel maps file pages 64 KB at a time around
// each fault (fault_around_bytes). Package initialisation runs code in
// nearly every linked package exactly once, so an idle agent or
// orchestrator keeps mapped several megabytes of code and tables it will
// not run again (docs/performance.md, "Idle memory"). Release asks the
// kernel to drop this process's mappings of the binary's read-only
// segments (madvise(2) MADV_DONTNEED): the pages stay in the page cache,
// shared with every other process of the same binary, and whatever the
// process runs afterwards is faulted back in from there, so the resident
// size settles at what the process actually uses.
//
// Only read-only mappings of the executable are touched (code, read-only
// data, the function tables): for a private file mapping that was never
// written, dropping a page and faulting it back yields the same bytes.
// Writable mappings (data, BSS, the heap) are never advised, because
// there MADV_DONTNEED would discard the process's own state.
package startpages

// Stats says what Release did.
type Stats struct {
	// Mappings is the number of read-only mappings of the executable that
	// were advised.
	Mappings int
	// Bytes is the size of their address ranges, in bytes (not what was
	// resident, which the kernel does not report back).
	Bytes uint64
}
