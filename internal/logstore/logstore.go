// Package logstore keeps step logs. Store is the interface the orchestrator,
// the API and live followers use; FS is the backend on the local
// filesystem, the embedded default, and PG (postgres.go) the backend in
// PostgreSQL that every orchestrator of a cluster shares.
//
// FS keeps one JSON Lines file per step, <root>/<runId>/<jobId>/step-<i>.log
// (job.log for the job-level bucket), each line one protocol.LogLine, next
// to an index of line offsets (step-<i>.idx: one little-endian uint64 per
// line, the byte offset where the line ends). Each line an agent numbered
// carries that number ("src"). A read of a page therefore
// costs the same wherever the page lies in the log. The log file is the
// source of truth: the index is checked against it, and completed from it,
// the first time a file is used by a process.
package logstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/boundedre"
	"kici.dev/kici/internal/protocol"
)

// JobStepIndex is the step index of the job-level bucket (checkout and
// setup output, protocol.LogChunk StepIndex -1). Its file is job.log.
const JobStepIndex = protocol.JobLogStepIndex

// BuildStepIndex is the step index of a job container's image build
// (protocol.ContainerBuildStepIndex). Its file is build.log.
const BuildStepIndex = protocol.ContainerBuildStepIndex

// DefaultReadLimit is the page size Read uses when limit <= 0.
const DefaultReadLimit = 1000

// MaxReadLimit caps the page size of one Read.
const MaxReadLimit = 10000

// ErrInvalidPath is returned (wrapped) when a run id, job id or step index
// cannot name a log file: ids must be 1–128 characters of [A-Za-z0-9-] and
// the step index must be >= BuildStepIndex.
var ErrInvalidPath = errors.New("logstore: invalid log path component")

var idPattern = boundedre.MustCompile(`^[A-Za-z0-9-]{1,128}$`, 1, 128)

// Store is a step-log store: an append-only sequence of lines per (run,
// job, step), numbered from 0, read by line offset. Implementations are
// safe for concurrent use.
type Store interface {
	// Append adds lines that have no agent offset (orchestrator and
	// scaler lines) at the end of a step's log.
	Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error
	// AppendFrom adds lines an agent numbered from offset (its count of
	// the step's lines before them, protocol.LogChunk.Offset). Lines the
	// store already holds from the agent are skipped, so a replay after a
	// reconnect stores nothing twice.
	AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (AppendResult, error)
	// Read returns up to limit lines from line cursor and the cursor after
	// the last one (see FS.Read).
	Read(runID, jobID string, stepIndex int, cursor, limit int) ([]protocol.LogLine, int, error)
	// Wait returns nil once the step's log holds more than cursor lines,
	// or ctx's error: a follower reads, then waits, then reads again.
	Wait(ctx context.Context, runID, jobID string, stepIndex int, cursor int) error
	// Scan calls fn for each line from line from on, in order, until fn
	// returns false or the log ends (search and raw download walk a whole
	// log once). A missing log scans as empty.
	Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error
	// RemoveRun deletes every step log of a run (retention); a run with
	// no logs is not an error.
	RemoveRun(runID string) error
	// SweepOlderThan deletes the logs of runs last written before cutoff
	// (KICI_STEP_LOG_TTL_DAYS), at most limit runs, and returns their ids.
	SweepOlderThan(cutoff time.Time, limit int) ([]string, error)
	// Stats reports what was stored and lost since the process started.
	Stats() Stats
}

// AppendResult is the outcome of AppendFrom.
type AppendResult struct {
	// Stored is the number of lines written by this call.
	Stored int
	// Duplicate is the number of lines skipped because the store had them.
	Duplicate int
	// Missing is the number of lines between what the store held and
	// offset: lines the agent numbered but that never arrived (0 unless
	// something upstream lost them).
	Missing int64
	// Acked is the agent offset the store now holds: every line numbered
	// below it is stored, or was dropped by the size cap or as a late
	// line of an archived log (a LogAck's offset).
	Acked int64
	// Capped is the number of lines not stored because the step's log
	// passed its size cap (KICI_STEP_LOG_MAX_BYTES); Stored counts the
	// cap's marker line when this call wrote it.
	Capped int
	// Late is the number of lines refused because the step's log was
	// already archived (see Archived).
	Late int
}

// Stats counts log traffic since the process started.
type Stats struct {
	// LinesStored and BytesStored count the lines (and their text bytes)
	// written.
	LinesStored, BytesStored int64
	// LinesDuplicate counts replayed lines skipped because they were
	// already stored.
	LinesDuplicate int64
	// LinesDropped counts lines an agent numbered that never reached the
	// store (AppendResult.Missing); it must stay 0.
	LinesDropped int64
	// LinesCapped counts agent lines not stored because their step's log
	// passed KICI_STEP_LOG_MAX_BYTES.
	LinesCapped int64
	// LinesLate counts lines refused because their step's log was
	// already archived.
	LinesLate int64
}

// FS stores step logs under a root directory. It is safe for concurrent use
// within one process (appends to one step are serialised); two processes
// must not write the same root.
type FS struct {
	root string

	mu    sync.Mutex
	files map[string]*logFile // open files, by log path

	appended wakeups // readers waiting for a log path's next append

	maxBytes atomic.Int64 // per-step cap on agent output; 0: none

	pendMu sync.Mutex
	track  bool               // an archiver uses this store: note appended logs
	walked bool               // the root was walked for live logs once
	pend   map[string]StepRef // live logs appended to since, by path (archive_fs.go)

	linesStored, bytesStored, linesDuplicate, linesDropped, linesCapped atomic.Int64
}

var _ Store = (*FS)(nil)

// NewFS returns a log store rooted at root. The directory is created on the
// first Append.
func NewFS(root string) *FS {
	f := &FS{root: root, files: map[string]*logFile{}}
	f.maxBytes.Store(DefaultStepLogMaxBytes)
	return f
}

// SetStepMaxBytes sets the per-step size cap on agent output in bytes
// (KICI_STEP_LOG_MAX_BYTES; <= 0: no cap). Past it a step's lines are
// dropped and acknowledged after one marker line; the job is not failed.
func (f *FS) SetStepMaxBytes(n int64) { f.maxBytes.Store(max(n, 0)) }

// Root returns the directory the store writes under.
func (f *FS) Root() string { return f.root }

// Path returns the file that holds the log of one step, after validating the
// components (ErrInvalidPath otherwise).
func (f *FS) Path(runID, jobID string, stepIndex int) (string, error) {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return "", err
	}
	name := "step-" + strconv.Itoa(stepIndex) + ".log"
	switch stepIndex {
	case JobStepIndex:
		name = "job.log"
	case BuildStepIndex:
		name = "build.log"
	}
	return filepath.Join(f.root, runID, jobID, name), nil
}

// checkKey validates the components naming a step's log (ErrInvalidPath).
func checkKey(runID, jobID string, stepIndex int) error {
	if !idPattern.MatchString(runID) {
		return fmt.Errorf("%w: run id %q", ErrInvalidPath, runID)
	}
	if !idPattern.MatchString(jobID) {
		return fmt.Errorf("%w: job id %q", ErrInvalidPath, jobID)
	}
	if stepIndex < BuildStepIndex {
		return fmt.Errorf("%w: step index %d", ErrInvalidPath, stepIndex)
	}
	return nil
}

// checkOffset refuses an agent offset that is negative or whose last line
// would be numbered past the int64 range (the acknowledged offset would
// wrap negative, and later replays would be stored twice).
func checkOffset(offset int64, n int) error {
	if offset < 0 {
		return fmt.Errorf("logstore: negative offset %d", offset)
	}
	if offset > math.MaxInt64-int64(n) {
		return fmt.Errorf("logstore: offset %d of %d lines overflows", offset, n)
	}
	return nil
}

// Stats implements Store.
func (f *FS) Stats() Stats {
	return Stats{LinesStored: f.linesStored.Load(), BytesStored: f.bytesStored.Load(),
		LinesDuplicate: f.linesDuplicate.Load(), LinesDropped: f.linesDropped.Load(),
		LinesCapped: f.linesCapped.Load()}
}

// Append writes lines to the end of a step's log, creating directories
// (0750) and files (0640) as needed, with one write for the lines and one
// for their index entries. Appending no lines is a no-op.
func (f *FS) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	_, err = f.append(path, StepRef{runID, jobID, stepIndex}, -1, lines)
	return err
}

// AppendFrom implements Store: lines below the agent offset already stored
// (found in the log itself, so also after a restart) are skipped; the rest
// are appended and the last one is tagged with its agent offset.
func (f *FS) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (AppendResult, error) {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return AppendResult{}, err
	}
	if err := checkOffset(offset, len(lines)); err != nil {
		return AppendResult{}, err
	}
	return f.append(path, StepRef{runID, jobID, stepIndex}, offset, lines)
}

func (f *FS) append(path string, ref StepRef, offset int64, lines []protocol.LogLine) (AppendResult, error) {
	for {
		lf, err := f.open(path, true)
		if err != nil {
			return AppendResult{}, err
		}
		lf.mu.Lock()
		if lf.closed { // evicted between lookup and lock
			lf.mu.Unlock()
			continue
		}
		res, n, err := lf.append(offset, lines, f.maxBytes.Load())
		lf.mu.Unlock()
		f.linesCapped.Add(int64(res.Capped))
		f.linesStored.Add(int64(res.Stored))
		f.bytesStored.Add(n)
		f.linesDuplicate.Add(int64(res.Duplicate))
		f.linesDropped.Add(res.Missing)
		if res.Stored > 0 {
			f.appended.wake(path)
			f.touched(path, ref)
		}
		return res, err
	}
}

// maxOpenFiles bounds the log files kept open for appends and reads.
const maxOpenFiles = 128

// open returns the state of a log file, loading it once. With create false
// a missing log returns (nil, nil) and creates nothing.
func (f *FS) open(path string, create bool) (*logFile, error) {
	f.mu.Lock()
	lf := f.files[path]
	f.mu.Unlock()
	if lf != nil {
		return lf, nil
	}
	if !create {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	} else if _, err := os.Stat(markerPath(path)); err == nil {
		return nil, ErrArchived // no new live log beside an archive
	}
	nf, err := openLogFile(path, create)
	if err != nil || nf == nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if lf := f.files[path]; lf != nil { // another goroutine won
		nf.close()
		return lf, nil
	}
	if len(f.files) >= maxOpenFiles {
		f.evictLocked()
	}
	f.files[path] = nf
	return nf, nil
}

// evictLocked closes the open files nobody is using. Caller holds f.mu.
func (f *FS) evictLocked() {
	for p, lf := range f.files {
		if lf.mu.TryLock() {
			lf.close()
			lf.mu.Unlock()
			delete(f.files, p)
		}
	}
}

// Read returns up to limit lines of a step's log starting at line number
// cursor (0-based), and the cursor of the line after the last one returned.
// limit <= 0 means DefaultReadLimit; it is capped at MaxReadLimit. A log that
// does not exist yet reads as empty (next == cursor), so a follower can poll
// (or Wait) with the returned cursor and receive lines appended later. The
// cost depends on the page, not on cursor. Errors: a negative cursor,
// ErrInvalidPath, I/O errors, or a line that is not valid JSON.
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
	limit = min(limit, MaxReadLimit)
	for {
		lf, err := f.open(path, false)
		if err != nil {
			return nil, cursor, fmt.Errorf("logstore: %w", err)
		}
		if lf == nil {
			return []protocol.LogLine{}, cursor, nil
		}
		lf.mu.Lock()
		if lf.closed {
			lf.mu.Unlock()
			continue
		}
		raw, err := lf.page(int64(cursor), limit)
		lf.mu.Unlock()
		if err != nil {
			return nil, cursor, fmt.Errorf("logstore: read %s: %w", path, err)
		}
		out, err := decodeLines(raw)
		if err != nil {
			return nil, cursor, fmt.Errorf("logstore: %s line %d: %w", path, cursor+len(out), err)
		}
		return out, cursor + len(out), nil
	}
}

// Lines returns the number of lines a step's log holds (0 when it does not
// exist).
func (f *FS) Lines(runID, jobID string, stepIndex int) (int, error) {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return 0, err
	}
	for {
		lf, err := f.open(path, false)
		if err != nil || lf == nil {
			return 0, err
		}
		lf.mu.Lock()
		n, closed := lf.lines, lf.closed
		lf.mu.Unlock()
		if !closed {
			return int(n), nil
		}
	}
}

// Wait implements Store. It wakes on appends made through this FS (the
// process that serves the agents).
func (f *FS) Wait(ctx context.Context, runID, jobID string, stepIndex int, cursor int) error {
	path, err := f.Path(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	return f.appended.waitForLines(ctx, path, func() (int, error) { return f.Lines(runID, jobID, stepIndex) }, cursor, 0)
}
