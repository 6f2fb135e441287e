package logstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/protocol"
)

// StepRef names one step's log.
type StepRef struct {
	RunID, JobID string
	// Step is the step index (JobStepIndex for the job-level bucket).
	Step int
}

// ErrArchived is returned (wrapped) by a backend's append to a step whose
// log is archived: late lines are refused (Archived counts them).
var ErrArchived = errors.New("logstore: the step's log is archived")

// archiveBackend is what Archived needs of a live backend (FS, PG) beyond
// Store: the archive marker kept beside the live log and the switch from
// the live log to the archive.
type archiveBackend interface {
	Store
	// Lines returns the number of live lines of a step.
	Lines(runID, jobID string, step int) (int, error)
	// archived returns the step's marker, nil while the log is live.
	archived(runID, jobID string, step int) (*archiveMarker, error)
	// liveState returns the lines and the agent offset the live log holds.
	liveState(runID, jobID string, step int) (lines, agentOffset int64, err error)
	// commitArchive records m and removes the live lines if the step
	// still holds exactly m.Lines of them (false: it grew; archive again
	// later). Committing an already recorded archive removes leftovers.
	commitArchive(runID, jobID string, step int, m archiveMarker) (bool, error)
	// pendingArchive lists live logs last written before cutoff, at most
	// limit of them after skipping offset (a pass that found only
	// unfinished jobs' logs looks further the next time).
	pendingArchive(cutoff time.Time, offset, limit int) ([]StepRef, error)
	// archivedInRun lists a run's archived steps.
	archivedInRun(runID string) ([]StepRef, error)
	// archiving tells the backend an archiver uses it.
	archiving()
	// sweepOlderThan is SweepOlderThan calling before with each run it
	// is about to clear.
	sweepOlderThan(cutoff time.Time, limit int, before func(runID string) error) ([]string, error)
}

// Archived is a Store whose finished step logs live in a blob store (the
// data directory or S3): ArchiveStep (or Sweep, for every finished job)
// writes a step's lines there as compressed chunks with an index, records
// that beside the live log, then removes the live lines (files, or
// PostgreSQL step_log_chunks rows). Reads, scans and waits go to the
// archive when the step has one and to the live backend otherwise, so
// every reader (API, web UI, kici-admin, search) is unchanged, and a
// running step's live tail is untouched: only logs of finished jobs are
// archived.
//
// Late lines, appended to a step after its log was archived, are refused:
// agent lines below the archived agent offset count as duplicates, the
// rest (and orchestrator lines) are dropped, acknowledged so nobody
// resends them, counted in Stats.LinesLate and logged. Archiving waits for
// the job to finish and its logs to be quiet (Sweep's quiet period), so
// this only happens to a line that arrives long after its job ended.
//
// Crash safety: the archive objects are written first (an object becomes
// visible only when complete), the marker next, the live lines last. A
// crash before the marker leaves the live log in charge and the next
// pass writes the same objects again; a crash after it leaves a marker
// that readers follow (the index is checked against the digest the marker
// records) and live leftovers the next pass removes.
type Archived struct {
	live  archiveBackend
	blobs blobstore.Store
	log   *slog.Logger

	mu          sync.Mutex
	idx         map[StepRef]*archiveIndex // loaded indexes; bounded by maxCachedIndexes
	sweepOffset int                       // pending logs Sweep skips (see Sweep)

	stepsArchived, linesArchived, bytesArchived, linesLate atomic.Int64
}

var _ Store = (*Archived)(nil)

// archiveBeforeCommitHook, when set (tests), runs between writing an
// archive and recording it.
var archiveBeforeCommitHook func()

// maxCachedIndexes bounds the archive indexes kept in memory.
const maxCachedIndexes = 256

// archiveTimeout bounds one blob-store call made for a read.
const archiveTimeout = 60 * time.Second

// NewArchived returns live (an *FS or a *PG) with finished logs archived to
// blobs. Errors: another kind of live store.
func NewArchived(live Store, blobs blobstore.Store, logger *slog.Logger) (*Archived, error) {
	b, ok := live.(archiveBackend)
	if !ok {
		return nil, fmt.Errorf("logstore: %T cannot archive step logs (use the files or postgres step-log store)", live)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b.archiving()
	return &Archived{live: b, blobs: blobs, log: logger, idx: map[StepRef]*archiveIndex{}}, nil
}

// Live returns the live backend.
func (a *Archived) Live() Store { return a.live }

// ArchiveStats counts archiving since the process started.
type ArchiveStats struct {
	// Steps, Lines and Bytes count the step logs archived and their
	// lines and uncompressed bytes.
	Steps, Lines, Bytes int64
}

// ArchiveStats reports what this process archived.
func (a *Archived) ArchiveStats() ArchiveStats {
	return ArchiveStats{Steps: a.stepsArchived.Load(), Lines: a.linesArchived.Load(), Bytes: a.bytesArchived.Load()}
}

// Stats implements Store: the live backend's counters plus late lines.
func (a *Archived) Stats() Stats {
	s := a.live.Stats()
	s.LinesLate += a.linesLate.Load()
	return s
}

// Append implements Store; lines for an archived step are refused and
// counted (see Archived).
func (a *Archived) Append(runID, jobID string, stepIndex int, lines []protocol.LogLine) error {
	err := a.live.Append(runID, jobID, stepIndex, lines)
	if errors.Is(err, ErrArchived) {
		a.late(runID, jobID, stepIndex, len(lines))
		return nil
	}
	return err
}

// AppendFrom implements Store; see Archived for lines of an archived step.
func (a *Archived) AppendFrom(runID, jobID string, stepIndex int, offset int64, lines []protocol.LogLine) (AppendResult, error) {
	res, err := a.live.AppendFrom(runID, jobID, stepIndex, offset, lines)
	if !errors.Is(err, ErrArchived) {
		return res, err
	}
	m, err := a.live.archived(runID, jobID, stepIndex)
	if err != nil || m == nil {
		return AppendResult{}, fmt.Errorf("logstore: append to an archived log: %w", err)
	}
	end := offset + int64(len(lines))
	dup := min(max(m.AgentOffset-offset, 0), int64(len(lines)))
	res = AppendResult{Duplicate: int(dup), Late: len(lines) - int(dup), Acked: max(end, m.AgentOffset)}
	if res.Late > 0 {
		a.late(runID, jobID, stepIndex, res.Late)
	}
	return res, nil
}

func (a *Archived) late(runID, jobID string, step, n int) {
	a.linesLate.Add(int64(n))
	a.log.Warn("late log lines refused: the step's log is already archived", "run", runID, "job", jobID, "step", step, "lines", n)
}

// Read implements Store (see FS.Read), from the archive when the step has
// one: the index names the chunks overlapping the page, read with one
// ranged read.
func (a *Archived) Read(runID, jobID string, stepIndex int, cursor, limit int) ([]protocol.LogLine, int, error) {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return nil, cursor, err
	}
	if cursor < 0 {
		return nil, cursor, fmt.Errorf("logstore: negative cursor %d", cursor)
	}
	m, err := a.live.archived(runID, jobID, stepIndex)
	if err != nil {
		return nil, cursor, err
	}
	if m == nil {
		lines, next, err := a.live.Read(runID, jobID, stepIndex, cursor, limit)
		if err != nil || len(lines) > 0 {
			return lines, next, err
		}
		// Archived between the look and the read?
		if m, err = a.live.archived(runID, jobID, stepIndex); err != nil || m == nil {
			return lines, next, err
		}
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	ref := StepRef{runID, jobID, stepIndex}
	out := make([]protocol.LogLine, 0, min(limit, 1024))
	err = a.scanArchive(ref, m, int64(cursor), int64(cursor)+int64(limit), func(n int64, l protocol.LogLine) bool {
		out = append(out, l)
		return true
	})
	if err != nil {
		return nil, cursor, err
	}
	return out, cursor + len(out), nil
}

// scanArchive calls fn for lines [from, to) of an archived step (to < 0:
// to the end), reading a few chunks per ranged read.
func (a *Archived) scanArchive(ref StepRef, m *archiveMarker, from, to int64, fn func(n int64, l protocol.LogLine) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	x, err := a.index(ctx, ref, m)
	if err != nil {
		return fmt.Errorf("logstore: archived log of job %s step %d: %w", ref.JobID, ref.Step, err)
	}
	if to < 0 || to > x.Lines {
		to = x.Lines
	}
	if from >= to {
		return nil
	}
	first, last := x.chunkOf(from), x.chunkOf(to-1)
	const perRead = 16
	stop := errors.New("stop")
	for c := first; c <= last; c += perRead {
		err := readChunks(ctx, a.blobs, x, c, min(c+perRead, last+1), func(start int64, lines []protocol.LogLine) error {
			for i := range lines {
				n := start + int64(i)
				if n < from {
					continue
				}
				if n >= to || !fn(n, lines[i]) {
					return stop
				}
			}
			return nil
		})
		if errors.Is(err, stop) {
			return nil
		}
		if err != nil {
			a.forget(ref)
			return fmt.Errorf("logstore: archived log of job %s step %d: %w", ref.JobID, ref.Step, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), archiveTimeout)
		defer cancel()
	}
	return nil
}

// index returns the step's archive index, loading and checking it once.
func (a *Archived) index(ctx context.Context, ref StepRef, m *archiveMarker) (*archiveIndex, error) {
	a.mu.Lock()
	x := a.idx[ref]
	a.mu.Unlock()
	if x != nil && x.Lines == m.Lines {
		return x, nil
	}
	x, err := loadIndex(ctx, a.blobs, ref.RunID, ref.JobID, ref.Step, m)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if len(a.idx) >= maxCachedIndexes {
		for k := range a.idx { // drop an arbitrary half
			if len(a.idx) < maxCachedIndexes/2 {
				break
			}
			delete(a.idx, k)
		}
	}
	a.idx[ref] = x
	a.mu.Unlock()
	return x, nil
}

func (a *Archived) forget(ref StepRef) {
	a.mu.Lock()
	delete(a.idx, ref)
	a.mu.Unlock()
}

// Lines returns the number of lines a step's log holds, archived or live.
func (a *Archived) Lines(runID, jobID string, stepIndex int) (int, error) {
	m, err := a.live.archived(runID, jobID, stepIndex)
	if err != nil {
		return 0, err
	}
	if m != nil {
		return int(m.Lines), nil
	}
	return a.live.Lines(runID, jobID, stepIndex)
}

// Wait implements Store. An archived log never grows: Wait returns at once
// below its end and waits for ctx past it.
func (a *Archived) Wait(ctx context.Context, runID, jobID string, stepIndex int, cursor int) error {
	m, err := a.live.archived(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	if m == nil {
		return a.live.Wait(ctx, runID, jobID, stepIndex, cursor)
	}
	if int64(cursor) < m.Lines {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// Scan implements Store over the archive or the live log; a scan that ran
// into the log being archived under it goes on in the archive.
func (a *Archived) Scan(runID, jobID string, stepIndex, from int, fn func(n int, l protocol.LogLine) bool) error {
	if err := checkKey(runID, jobID, stepIndex); err != nil {
		return err
	}
	ref := StepRef{runID, jobID, stepIndex}
	m, err := a.live.archived(runID, jobID, stepIndex)
	if err != nil {
		return err
	}
	next, stopped := int64(from), false
	if m == nil {
		err := a.live.Scan(runID, jobID, stepIndex, from, func(n int, l protocol.LogLine) bool {
			next = int64(n) + 1
			stopped = !fn(n, l)
			return !stopped
		})
		if err != nil || stopped {
			return err
		}
		if m, err = a.live.archived(runID, jobID, stepIndex); err != nil || m == nil || next >= m.Lines {
			return err
		}
	}
	return a.scanArchive(ref, m, next, -1, func(n int64, l protocol.LogLine) bool { return fn(int(n), l) })
}

// RemoveRun implements Store: the run's archives, then its live logs.
func (a *Archived) RemoveRun(runID string) error {
	if err := a.removeArchives(runID); err != nil {
		return err
	}
	return a.live.RemoveRun(runID)
}

func (a *Archived) removeArchives(runID string) error {
	refs, err := a.live.archivedInRun(runID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	for _, ref := range refs {
		a.forget(ref)
		data, index := archiveKeys(ref.RunID, ref.JobID, ref.Step)
		for _, k := range []string{index, data} {
			if err := a.blobs.Delete(ctx, k); err != nil {
				return fmt.Errorf("logstore: remove archived log: %w", err)
			}
		}
	}
	return nil
}

// SweepOlderThan implements Store: the live backend picks the runs (an
// archived step's marker keeps its last write time), and their archives
// are removed with them.
func (a *Archived) SweepOlderThan(cutoff time.Time, limit int) ([]string, error) {
	return a.live.sweepOlderThan(cutoff, limit, a.removeArchives)
}

// ArchiveStep archives one step's log if it is live, and finishes an
// archive a crash cut short. It returns whether the step's log is archived
// now (false: the log grew while it was written; try again later).
func (a *Archived) ArchiveStep(ctx context.Context, ref StepRef) (bool, error) {
	if err := checkKey(ref.RunID, ref.JobID, ref.Step); err != nil {
		return false, err
	}
	m, err := a.live.archived(ref.RunID, ref.JobID, ref.Step)
	if err != nil {
		return false, err
	}
	if m != nil { // leftovers of a pass cut after the marker
		return a.live.commitArchive(ref.RunID, ref.JobID, ref.Step, *m)
	}
	lines, agentOffset, err := a.live.liveState(ref.RunID, ref.JobID, ref.Step)
	if err != nil {
		return false, err
	}
	if lines == 0 {
		return false, nil
	}
	mk, err := writeArchive(ctx, a.blobs, ref.RunID, ref.JobID, ref.Step, lines, agentOffset,
		func(fn func(n int, l protocol.LogLine) bool) error {
			return a.live.Scan(ref.RunID, ref.JobID, ref.Step, 0, fn)
		})
	if err != nil {
		return false, err
	}
	if archiveBeforeCommitHook != nil {
		archiveBeforeCommitHook()
	}
	ok, err := a.live.commitArchive(ref.RunID, ref.JobID, ref.Step, mk)
	if ok && err == nil {
		a.stepsArchived.Add(1)
		a.linesArchived.Add(mk.Lines)
		a.bytesArchived.Add(mk.Bytes)
	}
	return ok, err
}

// Sweep archives the logs last written before now-quiet whose job is
// finished (finished reports that; nil treats every job as finished), at
// most limit steps, and returns how many it archived. A step whose pass
// failed is logged and left live for the next sweep.
func (a *Archived) Sweep(ctx context.Context, quiet time.Duration, limit int, finished func(ctx context.Context, runID, jobID string) (bool, error)) (n int, err error) {
	a.mu.Lock()
	offset := a.sweepOffset
	a.mu.Unlock()
	refs, err := a.live.pendingArchive(time.Now().Add(-quiet), offset, limit)
	if err != nil {
		return 0, err
	}
	defer func() {
		// A full batch of which nothing could be archived (logs of jobs
		// still running, or held): look past it next time, else start over.
		a.mu.Lock()
		if len(refs) == limit && n == 0 {
			a.sweepOffset += limit
		} else {
			a.sweepOffset = 0
		}
		a.mu.Unlock()
	}()
	sort.Slice(refs, func(i, j int) bool { return refs[i].JobID < refs[j].JobID })
	done := map[string]bool{}
	for _, ref := range refs {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if finished != nil {
			f, ok := done[ref.JobID]
			if !ok {
				if f, err = finished(ctx, ref.RunID, ref.JobID); err != nil {
					a.log.Warn("log archive: cannot tell whether the job finished", "job", ref.JobID, "err", err)
				}
				done[ref.JobID] = f
			}
			if !f {
				continue
			}
		}
		ok, err := a.ArchiveStep(ctx, ref)
		if err != nil {
			a.log.Warn("log archive: step not archived; the next sweep tries again", "run", ref.RunID, "job", ref.JobID, "step", ref.Step, "err", err)
			continue
		}
		if ok {
			n++
		}
	}
	return n, nil
}

var (
	_ archiveBackend = (*FS)(nil)
	_ archiveBackend = (*PG)(nil)
)
