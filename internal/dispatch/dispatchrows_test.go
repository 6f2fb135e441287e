package dispatch

import (
	"context"
	"errors"
	"testing"

	"kici.dev/kici/internal/store"
)

// A queue entry names its job's run, and the dispatch reads the run's rows
// by it; an entry that names none, or a run the job is not part of, must
// not drop the job: the job row decides.
func TestDispatchRowsFollowsTheJobRowWhenTheEntryNamesAnotherRun(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	ctx := context.Background()
	j := h.job("linux")
	other := h.job("linux")
	for _, runID := range []string{j.RunID, "", other.RunID, "no-such-run"} {
		rows, err := h.d.queue.dispatchRows(ctx, &store.QueueEntry{ID: j.ID, RunID: runID})
		if err != nil {
			t.Fatalf("entry naming run %q: %v", runID, err)
		}
		if rows.Job.ID != j.ID || rows.Run.ID != j.RunID || len(rows.Jobs) != 1 {
			t.Errorf("entry naming run %q: read job %s of run %s (%d jobs), want job %s of run %s", runID, rows.Job.ID, rows.Run.ID, len(rows.Jobs), j.ID, j.RunID)
		}
	}
	for _, runID := range []string{j.RunID, ""} {
		if _, err := h.d.queue.dispatchRows(ctx, &store.QueueEntry{ID: "no-such-job", RunID: runID}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown job, entry naming run %q: err = %v, want ErrNotFound", runID, err)
		}
	}
}
