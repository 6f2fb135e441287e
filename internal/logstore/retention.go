package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RemoveRun deletes every step log of a run (retention). A run with no
// logs is not an error.
func (f *FS) RemoveRun(runID string) error {
	if !idPattern.MatchString(runID) {
		return fmt.Errorf("%w: run id %q", ErrInvalidPath, runID)
	}
	f.forgetRun(runID)
	if err := os.RemoveAll(filepath.Join(f.root, runID)); err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	return nil
}

// SweepOlderThan deletes the logs of runs whose newest log file was last
// written before cutoff (KICI_STEP_LOG_TTL_DAYS), at most limit runs per
// call, and returns the ids of the runs it cleared. A run still being
// written to is never cleared: its files keep being modified.
func (f *FS) SweepOlderThan(cutoff time.Time, limit int) ([]string, error) {
	return f.sweepOlderThan(cutoff, limit, nil)
}

// sweepOlderThan is SweepOlderThan calling before (when set) with each run
// about to be cleared; an error from it leaves the run in place.
func (f *FS) sweepOlderThan(cutoff time.Time, limit int, before func(runID string) error) ([]string, error) {
	entries, err := os.ReadDir(f.root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	var swept []string
	for _, e := range entries {
		if len(swept) >= limit {
			break
		}
		if !e.IsDir() || !idPattern.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(f.root, e.Name())
		if newest(dir).After(cutoff) {
			continue
		}
		if before != nil {
			if err := before(e.Name()); err != nil {
				return swept, err
			}
		}
		f.forgetRun(e.Name())
		if err := os.RemoveAll(dir); err != nil {
			return swept, fmt.Errorf("logstore: %w", err)
		}
		swept = append(swept, e.Name())
	}
	return swept, nil
}

// forgetRun closes and drops the open state of every log of a run whose
// files are being removed, so a later read finds them gone rather than the
// removed files' contents.
func (f *FS) forgetRun(runID string) {
	prefix := filepath.Join(f.root, runID) + string(filepath.Separator)
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, lf := range f.files {
		if strings.HasPrefix(p, prefix) {
			lf.mu.Lock()
			lf.close()
			lf.mu.Unlock()
			delete(f.files, p)
		}
	}
}

// newest returns the latest modification time of the log files under dir
// (the directory's own when it holds none). Only *.log files and archive
// markers (*.archived, written once the log was archived) count: a line
// index (*.idx) is derived from its log and rewritten when a process first
// opens the log, so its time says nothing about when lines were written.
func newest(dir string) time.Time {
	var t time.Time
	found := false
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if ext := filepath.Ext(d.Name()); err != nil || d.IsDir() || (ext != ".log" && ext != ".archived") {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			found = true
			if fi.ModTime().After(t) {
				t = fi.ModTime()
			}
		}
		return nil
	})
	if !found {
		if fi, err := os.Stat(dir); err == nil {
			return fi.ModTime()
		}
	}
	return t
}
