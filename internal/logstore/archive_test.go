package logstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/blobstore/blobtest"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

// forEachArchive runs fn for each live backend (files, PostgreSQL) with
// each blob store (the data directory, the S3 test server). open returns
// a new instance over the same storage each call (a restart).
func forEachArchive(t *testing.T, fn func(t *testing.T, open func() *Archived, liveLines func(step int) int)) {
	blobsFor := map[string]func(t *testing.T) blobstore.Store{
		"dir": mustDir,
		"s3":  func(t *testing.T) blobstore.Store { return blobtest.S3(t, 0) },
	}
	for _, name := range []string{"dir", "s3"} {
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, openLive func() Store) {
				blobs := blobsFor[name](t)
				first := openLive()
				open := func() *Archived {
					a, err := NewArchived(openLive(), blobs, nil)
					if err != nil {
						t.Fatal(err)
					}
					return a
				}
				fn(t, open, func(step int) int { return countLive(t, first, step) })
			})
		})
	}
}

// countLive returns the live lines the backend still keeps for a step:
// lines in its file, or its step_log_chunks rows' lines.
func countLive(t *testing.T, live Store, step int) int {
	t.Helper()
	switch s := live.(type) {
	case *FS:
		path, _ := s.Path(archRun, jobID, step)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	case *PG:
		var n int64
		err := s.pool.QueryRow(context.Background(), `SELECT coalesce(sum(line_count), 0) FROM step_log_chunks
			WHERE job_id = $1 AND step_index = $2 AND run_id = $3`, jobID, step, archRun).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	t.Fatalf("unknown backend %T", live)
	return 0
}

// archRun is the run id of the archive tests.
const archRun = "a1c2e3f4-0000-4000-8000-00000000a1c2"

func readAll(t *testing.T, s Store, step, page int) []string {
	t.Helper()
	var out []string
	for cursor := 0; ; {
		ls, next, err := s.Read(archRun, jobID, step, cursor, page)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			return out
		}
		for _, l := range ls {
			out = append(out, l.Text)
		}
		cursor = next
	}
}

// A finished step's log is moved to the blob store: every reader sees the
// same lines, by page and by scan, the live lines are removed, and late
// lines are refused and counted while replays count as duplicates.
func TestArchiveReadsBackEveryLineAndRemovesLiveLines(t *testing.T) {
	const n = 5000
	forEachArchive(t, func(t *testing.T, open func() *Archived, liveLines func(int) int) {
		a := open()
		if err := a.Append(archRun, jobID, 1, []protocol.LogLine{{Text: "orchestrator says hello"}}); err != nil {
			t.Fatal(err)
		}
		for off := 0; off < n; off += 700 {
			if _, err := a.AppendFrom(archRun, jobID, 1, int64(off), lines(off, min(700, n-off))); err != nil {
				t.Fatal(err)
			}
		}
		before := readAll(t, a, 1, 333)
		if len(before) != n+1 {
			t.Fatalf("live log has %d lines, want %d", len(before), n+1)
		}
		ok, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 1})
		if err != nil || !ok {
			t.Fatalf("ArchiveStep = %v, %v", ok, err)
		}
		if got := liveLines(1); got != 0 {
			t.Fatalf("%d live lines remain after archiving", got)
		}
		for _, s := range []*Archived{a, open()} { // this node and a restarted one
			after := readAll(t, s, 1, 333)
			if strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("archived log differs: %d lines, first %q last %q", len(after), after[0], after[len(after)-1])
			}
			if c, _ := s.Lines(archRun, jobID, 1); c != n+1 {
				t.Fatalf("Lines = %d", c)
			}
			var found []int
			if err := s.Scan(archRun, jobID, 1, 2000, func(i int, l protocol.LogLine) bool {
				if strings.HasSuffix(l.Text, "99") {
					found = append(found, i)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			// Line i is the agent's "line i-1" (line 0 is the orchestrator's).
			if len(found) != 31 || found[0] != 2000 || before[found[0]] != "line 1999" || found[30] != n {
				t.Fatalf("search from line 2000 found %d lines, first %v", len(found), found)
			}
			page, next, err := s.Read(archRun, jobID, 1, n-2, 10)
			if err != nil || len(page) != 3 || next != n+1 || page[2].Text != "line 4999" || page[2].Stream != protocol.StreamStdout {
				t.Fatalf("last page = %+v next %d err %v", page, next, err)
			}
		}
		// A replay of lines the archive holds is a duplicate; new lines and
		// orchestrator lines are refused, acknowledged and counted.
		res, err := a.AppendFrom(archRun, jobID, 1, n-2, lines(n-2, 5))
		if err != nil || res.Duplicate != 2 || res.Late != 3 || res.Acked != n+3 || res.Stored != 0 {
			t.Fatalf("late AppendFrom = %+v, %v", res, err)
		}
		if err := a.Append(archRun, jobID, 1, []protocol.LogLine{{Text: "too late"}}); err != nil {
			t.Fatal(err)
		}
		if st := a.Stats(); st.LinesLate != 4 {
			t.Fatalf("LinesLate = %d, want 4", st.LinesLate)
		}
		if got := readAll(t, a, 1, 1000); len(got) != n+1 || liveLines(1) != 0 {
			t.Fatalf("late lines changed the log: %d lines, %d live", len(got), liveLines(1))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := a.Wait(ctx, archRun, jobID, 1, 10); err != nil {
			t.Fatalf("Wait below the end of an archived log: %v", err)
		}
		// Retention removes the archive too.
		if err := a.RemoveRun(archRun); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, open(), 1, 1000); len(got) != 0 {
			t.Fatalf("%d lines readable after RemoveRun", len(got))
		}
		data, _ := archiveKeys(archRun, jobID, 1)
		if _, err := a.blobs.Open(context.Background(), data, ""); !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("archive data after RemoveRun: %v", err)
		}
	})
}

// A node that stops between writing the archive and removing the live
// lines loses nothing: readers get every line once, and the next pass
// (after a restart) finishes the job without writing anything twice.
func TestArchiveCrashBetweenWriteAndDeleteIsRedone(t *testing.T) {
	const n = 3000
	forEachArchive(t, func(t *testing.T, open func() *Archived, liveLines func(int) int) {
		a := open()
		if _, err := a.AppendFrom(archRun, jobID, 0, 0, lines(0, n)); err != nil {
			t.Fatal(err)
		}
		crash := errors.New("node killed")
		archiveCrashHook = func() error { return crash }
		_, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 0})
		archiveCrashHook = nil
		if !errors.Is(err, crash) {
			t.Fatalf("ArchiveStep = %v, want the simulated crash", err)
		}
		if liveLines(0) != n {
			t.Fatalf("live lines after the crash: %d", liveLines(0))
		}
		b := open() // the restarted node
		if got := readAll(t, b, 0, 1000); strings.Join(got, "|") != want(n) {
			t.Fatalf("after the crash the log reads %d lines", len(got))
		}
		archived, err := b.Sweep(context.Background(), 0, 100, nil)
		if err != nil || archived != 1 {
			t.Fatalf("Sweep after restart = %d, %v", archived, err)
		}
		if liveLines(0) != 0 {
			t.Fatalf("live lines after the sweep: %d", liveLines(0))
		}
		if got := readAll(t, b, 0, 1000); strings.Join(got, "|") != want(n) {
			t.Fatalf("after re-archiving the log reads %d lines", len(got))
		}
		if again, err := b.Sweep(context.Background(), 0, 100, nil); err != nil || again != 0 {
			t.Fatalf("second sweep = %d, %v", again, err)
		}
		// The agent replays its last batch after the restart: nothing is
		// stored twice.
		res, err := b.AppendFrom(archRun, jobID, 0, n-100, lines(n-100, 100))
		if err != nil || res.Duplicate != 100 || res.Late != 0 || res.Acked != n {
			t.Fatalf("replay after archive = %+v, %v", res, err)
		}
	})
}

// Sweep archives only the logs of finished jobs.
func TestArchiveSweepSkipsRunningJobs(t *testing.T) {
	a, err := NewArchived(NewFS(t.TempDir()), mustDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	const running = "7d1e2f3a-0000-4d6e-8f90-a1b2c3d4e5f6"
	for _, j := range []string{jobID, running} {
		if _, err := a.AppendFrom(archRun, j, 0, 0, lines(0, 10)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.Sweep(context.Background(), 0, 10, func(_ context.Context, _, j string) (bool, error) { return j != running, nil })
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if m, _ := a.live.archived(archRun, running, 0); m != nil {
		t.Fatal("the running job's log was archived")
	}
	if res, err := a.AppendFrom(archRun, running, 0, 10, lines(10, 1)); err != nil || res.Stored != 1 {
		t.Fatalf("the running job's tail: %+v %v", res, err)
	}
}

func mustDir(t *testing.T) blobstore.Store {
	t.Helper()
	d, err := blobstore.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Lines that arrive while a log is being archived keep the log live: the
// pass records nothing and removes nothing, and the next pass archives
// every line.
func TestArchiveOfAGrowingLogIsNotRecorded(t *testing.T) {
	forEachArchive(t, func(t *testing.T, open func() *Archived, liveLines func(int) int) {
		a := open()
		if _, err := a.AppendFrom(archRun, jobID, 2, 0, lines(0, 100)); err != nil {
			t.Fatal(err)
		}
		archiveBeforeCommitHook = func() {
			if _, err := a.AppendFrom(archRun, jobID, 2, 100, lines(100, 5)); err != nil {
				t.Error(err)
			}
		}
		ok, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 2})
		archiveBeforeCommitHook = nil
		if err != nil || ok {
			t.Fatalf("ArchiveStep of a growing log = %v, %v; want not archived", ok, err)
		}
		if liveLines(2) != 105 {
			t.Fatalf("live lines = %d, want 105", liveLines(2))
		}
		if ok, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 2}); err != nil || !ok {
			t.Fatalf("second pass = %v, %v", ok, err)
		}
		if got := readAll(t, a, 2, 50); strings.Join(got, "|") != want(105) || liveLines(2) != 0 {
			t.Fatalf("archived %d lines, %d live", len(got), liveLines(2))
		}
	})
}

// Retention's sweep clears a run's archived logs with its live ones.
func TestArchiveSweptByRetention(t *testing.T) {
	forEachArchive(t, func(t *testing.T, open func() *Archived, liveLines func(int) int) {
		a := open()
		for step := 0; step < 2; step++ {
			if _, err := a.AppendFrom(archRun, jobID, step, 0, lines(0, 10)); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := a.ArchiveStep(context.Background(), StepRef{archRun, jobID, 0}); err != nil || !ok {
			t.Fatalf("ArchiveStep = %v, %v", ok, err)
		}
		swept, err := a.SweepOlderThan(time.Now().Add(time.Hour), 10)
		if err != nil || len(swept) != 1 || swept[0] != archRun {
			t.Fatalf("SweepOlderThan = %v, %v", swept, err)
		}
		data, index := archiveKeys(archRun, jobID, 0)
		for _, k := range []string{data, index} {
			if _, err := a.blobs.Open(context.Background(), k, ""); !errors.Is(err, blobstore.ErrNotFound) {
				t.Fatalf("%s after the sweep: %v", k, err)
			}
		}
		for step := 0; step < 2; step++ {
			if got := readAll(t, open(), step, 100); len(got) != 0 || liveLines(step) != 0 {
				t.Fatalf("step %d after the sweep: %d lines, %d live", step, len(got), liveLines(step))
			}
		}
	})
}

// Quiet logs of jobs that are still running (or held) do not keep the
// sweep from reaching a finished job's log behind them.
func TestArchiveSweepLooksPastUnfinishedJobs(t *testing.T) {
	url := migratedDatabase(t)
	a, err := NewArchived(openPG(t, url), mustDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []string{"job-running-1", "job-running-2", "job-running-3", "job-finished"}
	for _, j := range jobs { // oldest first: the running ones come first
		if _, err := a.AppendFrom(archRun, j, 0, 0, lines(0, 3)); err != nil {
			t.Fatal(err)
		}
		wait.Elapse(t.Context(), 5*time.Millisecond) // the next log is written strictly later
	}
	finished := func(_ context.Context, _, j string) (bool, error) { return j == "job-finished", nil }
	archived := 0
	for pass := 0; pass < len(jobs) && archived == 0; pass++ {
		n, err := a.Sweep(context.Background(), 0, 1, finished)
		if err != nil {
			t.Fatal(err)
		}
		archived += n
	}
	if archived != 1 {
		t.Fatalf("after %d one-log passes the finished job's log is not archived", len(jobs))
	}
	if m, _ := a.live.archived(archRun, "job-finished", 0); m == nil {
		t.Fatal("the finished job's log has no archive")
	}
}
