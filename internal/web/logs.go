package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runstream"
)

// LogSource is what the UI needs of the log store: reads by line offset
// (one page of a job page) and a scan from an offset (search and raw
// download walk a whole log once, never page by page from the start).
type LogSource interface {
	runstream.LogReader
	// Scan calls fn for each complete line from offset from, in order,
	// until fn returns false or the log ends. A missing log scans as
	// empty.
	Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error
}

// FSLogs adapts the filesystem log store (one JSON line per log line).
type FSLogs struct{ *logstore.FS }

// Scan implements LogSource by reading the step's file once.
func (f FSLogs) Scan(runID, jobID string, stepIndex, from int, fn func(int, protocol.LogLine) bool) error {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 256<<10)
	for n := 0; ; n++ {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole.
			rest, err2 := r.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), err2
		}
		if err == io.EOF {
			return nil // a trailing partial line is still being written
		}
		if err != nil {
			return err
		}
		if n < from {
			continue
		}
		var l protocol.LogLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("web: %s line %d: %w", path, n, err)
		}
		if !fn(n, l) {
			return nil
		}
	}
}
