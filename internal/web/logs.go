package web

import (
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runstream"
)

// LogSource is what the UI needs of the log store (logstore.Store): reads
// by line offset (one page of a job page) and a scan from an offset (search
// and raw download walk a whole log once, never page by page from the
// start).
type LogSource interface {
	runstream.LogReader
	// Scan calls fn for each complete line from offset from, in order,
	// until fn returns false or the log ends. A missing log scans as
	// empty.
	Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error
}
