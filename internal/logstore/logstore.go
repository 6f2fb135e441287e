// Package logstore keeps step logs on the local filesystem, one JSON Lines
// file per step: <root>/<runId>/<jobId>/step-<i>.log, each line one
// protocol.LogLine. Appends use O_APPEND; reads page through a file by line
// cursor, so a reader can follow a step by re-reading from its last cursor.
package logstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"kici.dev/kici/internal/protocol"
)

// JobStepIndex is the step index of the job-level bucket (checkout and
// setup output, protocol.LogChunk StepIndex -1). Its file is job.log.
const JobStepIndex = -1

// DefaultReadLimit is the page size Read uses when limit <= 0.
const DefaultReadLimit = 1000

// MaxReadLimit caps the page size of one Read.
const MaxReadLimit = 10000

// ErrInvalidPath is returned (wrapped) when a run id, job id or step index
// cannot name a log file: ids must be 1–128 characters of [A-Za-z0-9-] and
// the step index must be >= JobStepIndex.
var ErrInvalidPath = errors.New("logstore: invalid log path component")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)

// FS stores step logs under a root directory. It is safe for concurrent use;
// appends to the same file from one process are serialised.
type FS struct {
	root  string
	locks sync.Map // file path -> *sync.Mutex
}

// NewFS returns a log store rooted at root. The directory is created on the
// first Append.
func NewFS(root string) *FS {
	return &FS{root: root}
}

// Root returns the directory the store writes under.
func (f *FS) Root() string { return f.root }

// Path returns the file that holds the log of one step, after validating the
// components (ErrInvalidPath otherwise).
func (f *FS) Path(runID, jobID string, stepIndex int) (string, error) {
	if !idPattern.MatchString(runID) {
		return "", fmt.Errorf("%w: run id %q", ErrInvalidPath, runID)
	}
	if !idPattern.MatchString(jobID) {
		return "", fmt.Errorf("%w: job id %q", ErrInvalidPath, jobID)
	}
	var name string
	switch {
	case stepIndex == JobStepIndex:
		name = "job.log"
	case stepIndex >= 0:
		name = "step-" + strconv.Itoa(stepIndex) + ".log"
	default:
		return "", fmt.Errorf("%w: step index %d", ErrInvalidPath, stepIndex)
	}
	return filepath.Join(f.root, runID, jobID, name), nil
}

func (f *FS) lockFor(path string) *sync.Mutex {
	m, _ := f.locks.LoadOrStore(path, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// Append writes lines to the end of a step's log, one JSON object per line,
// creating directories (0750) and the file (0640) as needed. All lines of one
// call are written with a single write. Appending no lines is a no-op.
func (f *FS) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range lines {
		if err := enc.Encode(&lines[i]); err != nil { // Encode adds the '\n'
			return fmt.Errorf("logstore: encode line: %w", err)
		}
	}
	mu := f.lockFor(path)
	mu.Lock()
	defer mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	if _, err := file.Write(buf.Bytes()); err != nil {
		file.Close()
		return fmt.Errorf("logstore: append %s: %w", path, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("logstore: close %s: %w", path, err)
	}
	return nil
}

// Read returns up to limit lines of a step's log starting at line number
// cursor (0-based), and the cursor of the line after the last one returned.
// limit <= 0 means DefaultReadLimit; it is capped at MaxReadLimit. A log that
// does not exist yet reads as empty (next == cursor), so a follower can poll
// with the returned cursor and receive lines appended later. A trailing line
// still being written (no newline yet) is not returned. Errors: a negative
// cursor, ErrInvalidPath, I/O errors, or a line that is not valid JSON.
func (f *FS) Read(runID, jobID string, stepIndex int, cursor, limit int) ([]protocol.LogLine, int, error) {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return nil, cursor, err
	}
	if cursor < 0 {
		return nil, cursor, fmt.Errorf("logstore: negative cursor %d", cursor)
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	if limit > MaxReadLimit {
		limit = MaxReadLimit
	}
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return []protocol.LogLine{}, cursor, nil
	}
	if err != nil {
		return nil, cursor, fmt.Errorf("logstore: %w", err)
	}
	defer file.Close()

	r := bufio.NewReaderSize(file, 64<<10)
	out := []protocol.LogLine{}
	lineNo := 0
	for len(out) < limit {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // EOF, possibly with an incomplete line: not returned yet
		}
		if err != nil {
			return nil, cursor, fmt.Errorf("logstore: read %s: %w", path, err)
		}
		if lineNo < cursor {
			lineNo++
			continue
		}
		var l protocol.LogLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, cursor, fmt.Errorf("logstore: %s line %d: %w", path, lineNo, err)
		}
		out = append(out, l)
		lineNo++
	}
	return out, cursor + len(out), nil
}
