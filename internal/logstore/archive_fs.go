package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// markerPath is where FS records that the log at path (…/step-<i>.log) is
// archived: …/step-<i>.archived, a JSON archiveMarker.
func markerPath(path string) string { return strings.TrimSuffix(path, ".log") + ".archived" }

// archiveCrashHook, when set (tests), runs after an archive is recorded and
// before the live log is removed; an error stops there, as a crash would.
var archiveCrashHook func() error

// archived implements archiveBackend: the step's marker file, nil if none.
func (f *FS) archived(runID, jobID string, step int) (*archiveMarker, error) {
	path, err := f.Path(runID, jobID, step)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(markerPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	var m archiveMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("logstore: archive marker %s: %w (delete it to archive the step again)", markerPath(path), err)
	}
	return &m, nil
}

// liveState implements archiveBackend: the lines and agent offset held.
func (f *FS) liveState(runID, jobID string, step int) (lines, agentOffset int64, err error) {
	path, err := f.Path(runID, jobID, step)
	if err != nil {
		return 0, 0, err
	}
	for {
		lf, err := f.open(path, false)
		if err != nil || lf == nil {
			return 0, 0, err
		}
		lf.mu.Lock()
		if lf.closed {
			lf.mu.Unlock()
			continue
		}
		if lf.hwm < 0 {
			if lf.hwm, err = lf.agentOffset(); err != nil {
				lf.hwm = -1
				lf.mu.Unlock()
				return 0, 0, err
			}
		}
		lines, agentOffset = lf.lines, lf.hwm
		lf.mu.Unlock()
		return lines, agentOffset, nil
	}
}

// commitArchive implements archiveBackend: when the live log still holds
// m.Lines lines it writes the marker (synced, renamed into place) and then
// removes the log and its index; appends after that are refused. A marker
// already there (a pass cut between the two) just has the leftovers
// removed.
func (f *FS) commitArchive(runID, jobID string, step int, m archiveMarker) (bool, error) {
	path, err := f.Path(runID, jobID, step)
	if err != nil {
		return false, err
	}
	if old, err := f.archived(runID, jobID, step); err != nil {
		return false, err
	} else if old != nil {
		return true, f.dropLive(path)
	}
	lf, err := f.open(path, false)
	if err != nil || lf == nil {
		return false, err
	}
	// Lock order as everywhere: the open-file map, then the file. The
	// file is closed and forgotten with the marker in place, so no append
	// lands in a log about to be removed.
	f.mu.Lock()
	lf.mu.Lock()
	if lf.closed || lf.lines != m.Lines {
		lf.mu.Unlock()
		f.mu.Unlock()
		return false, nil
	}
	err = writeFileSync(markerPath(path), m)
	if err == nil {
		lf.close()
		if f.files[path] == lf {
			delete(f.files, path)
		}
	}
	lf.mu.Unlock()
	f.mu.Unlock()
	if err != nil {
		return false, err
	}
	if archiveCrashHook != nil {
		if err := archiveCrashHook(); err != nil {
			return false, err
		}
	}
	return true, f.dropLive(path)
}

// dropLive closes and removes the live log at path and its index.
func (f *FS) dropLive(path string) error {
	f.mu.Lock()
	if lf := f.files[path]; lf != nil {
		lf.mu.Lock()
		lf.close()
		lf.mu.Unlock()
		delete(f.files, path)
	}
	f.mu.Unlock()
	for _, p := range []string{path, strings.TrimSuffix(path, ".log") + ".idx"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logstore: remove archived live log: %w", err)
		}
	}
	return nil
}

// writeFileSync writes v as JSON to path through a synced temporary file
// renamed into place, so the file is either absent or complete.
func writeFileSync(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	if _, err = fh.Write(b); err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("logstore: write archive marker: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// touched notes that the live log at path was appended to, so the
// archiver looks at it (a log this process never wrote is found by the
// one walk of the root after a start).
func (f *FS) touched(path string, ref StepRef) {
	f.pendMu.Lock()
	if f.track {
		if f.pend == nil {
			f.pend = map[string]StepRef{}
		}
		f.pend[path] = ref
	}
	f.pendMu.Unlock()
}

// archiving implements archiveBackend: from now on appended logs are
// noted for pendingArchive.
func (f *FS) archiving() {
	f.pendMu.Lock()
	f.track = true
	f.pendMu.Unlock()
}

// pendingArchive implements archiveBackend: live logs last written before
// cutoff, including ones whose marker is written but whose removal was
// cut short, at most limit of them. The first call walks the whole root
// (logs written before this process started); later calls only look at
// the logs appended to since, so a pass costs what was written, not what
// is kept. One process owns a root, so nothing else adds logs to it.
func (f *FS) pendingArchive(cutoff time.Time, offset, limit int) ([]StepRef, error) {
	f.pendMu.Lock()
	walk := !f.walked
	f.pendMu.Unlock()
	if walk {
		found, err := f.walkLive()
		if err != nil {
			return nil, err
		}
		f.pendMu.Lock()
		if f.pend == nil {
			f.pend = map[string]StepRef{}
		}
		for p, ref := range found {
			f.pend[p] = ref
		}
		f.walked = true
		f.pendMu.Unlock()
	}
	f.pendMu.Lock()
	paths := make([]string, 0, len(f.pend))
	for p := range f.pend {
		paths = append(paths, p)
	}
	f.pendMu.Unlock()
	var out []StepRef
	for _, p := range paths {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) { // archived or removed: nothing to do
			f.pendMu.Lock()
			if _, e := os.Stat(p); errors.Is(e, os.ErrNotExist) {
				delete(f.pend, p)
			}
			f.pendMu.Unlock()
			continue
		}
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		f.pendMu.Lock()
		ref, ok := f.pend[p]
		f.pendMu.Unlock()
		if !ok {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		out = append(out, ref)
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// walkLive finds every live log file under the root.
func (f *FS) walkLive() (map[string]StepRef, error) {
	found := map[string]StepRef{}
	runs, err := os.ReadDir(f.root)
	if errors.Is(err, os.ErrNotExist) {
		return found, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	for _, r := range runs {
		if !r.IsDir() || !idPattern.MatchString(r.Name()) {
			continue
		}
		jobs, _ := os.ReadDir(filepath.Join(f.root, r.Name()))
		for _, j := range jobs {
			if !j.IsDir() || !idPattern.MatchString(j.Name()) {
				continue
			}
			dir := filepath.Join(f.root, r.Name(), j.Name())
			files, _ := os.ReadDir(dir)
			for _, e := range files {
				if step, ok := stepOfFile(e.Name(), ".log"); ok {
					found[filepath.Join(dir, e.Name())] = StepRef{RunID: r.Name(), JobID: j.Name(), Step: step}
				}
			}
		}
	}
	return found, nil
}

// archivedInRun implements archiveBackend: the steps of a run with a
// marker.
func (f *FS) archivedInRun(runID string) ([]StepRef, error) {
	if !idPattern.MatchString(runID) {
		return nil, fmt.Errorf("%w: run id %q", ErrInvalidPath, runID)
	}
	matches, err := filepath.Glob(filepath.Join(f.root, runID, "*", "*.archived"))
	if err != nil {
		return nil, err
	}
	var out []StepRef
	for _, m := range matches {
		step, ok := stepOfFile(filepath.Base(m), ".archived")
		if ok {
			out = append(out, StepRef{RunID: runID, JobID: filepath.Base(filepath.Dir(m)), Step: step})
		}
	}
	return out, nil
}

// stepOfFile parses "job<ext>" and "step-<i><ext>".
func stepOfFile(name, ext string) (int, bool) {
	base, ok := strings.CutSuffix(name, ext)
	if !ok {
		return 0, false
	}
	if base == "job" {
		return JobStepIndex, true
	}
	s, ok := strings.CutPrefix(base, "step-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
