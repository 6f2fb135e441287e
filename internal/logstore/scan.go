package logstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"kici.dev/kici/internal/protocol"
)

// Scan implements Store by reading the step's file once from its start.
func (f *FS) Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error {
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
			return fmt.Errorf("logstore: %s line %d: %w", path, n, err)
		}
		if !fn(n, l) {
			return nil
		}
	}
}

// scanPages implements Scan over Read, one MaxReadLimit page at a time.
func scanPages(s Store, runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error {
	for cursor := from; ; {
		page, next, err := s.Read(runID, jobID, stepIndex, cursor, MaxReadLimit)
		if err != nil {
			return err
		}
		for i, l := range page {
			if !fn(cursor+i, l) {
				return nil
			}
		}
		if len(page) < MaxReadLimit {
			return nil
		}
		cursor = next
	}
}
