package runs

import (
	"math/rand/v2"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

// TestRunStatusNeverStuckUnderRandomJobEvents proves that run
// status aggregation never sticks: for random orders of job terminal reports (with
// replays, conflicting late reports, concurrent senders and cancels of
// unstarted jobs), every run completes exactly once, never stays
// running with all jobs terminal, and its status is the one derived from
// its jobs' final statuses.
func TestRunStatusNeverStuckUnderRandomJobEvents(t *testing.T) {
	statuses := []status.Job{status.JobSuccess, status.JobFailed, status.JobCancelled, status.JobTimedOutStale}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		f := newFixture(t)
		run, ids := f.createRun(js("a"), js("b"), js("c", need("a")), js("d", need("b", status.JobSuccess, status.JobFailed, status.JobCancelled, status.JobSkipped, status.JobTimedOutStale)))
		names := []string{"a", "b", "c", "d"}
		cancelAt := -1
		if rng.IntN(3) == 0 {
			cancelAt = rng.IntN(6)
		}
		for step := 0; step < 12; step++ {
			if step == cancelAt {
				if _, err := f.tr.CancelJobs(f.ctx, run.ID, "cancelled by test"); err != nil {
					t.Fatal(err)
				}
			}
			n := names[rng.IntN(len(names))]
			j := f.job(ids[n])
			if j.Status == status.JobPending {
				continue // not released: no agent could report it
			}
			if j.Status == status.JobQueued && rng.IntN(2) == 0 {
				f.start(ids[n], t0)
			}
			// A terminal report, sometimes sent twice at once (replay).
			st := statuses[rng.IntN(len(statuses))]
			done := make(chan struct{})
			go func() { _ = f.tr.JobFinished(f.ctx, ids[n], st, "", t0); close(done) }()
			f.finish(ids[n], statuses[rng.IntN(len(statuses))], t0)
			<-done
		}
		// Drain: report whatever is left.
		for i := 0; i < 4; i++ {
			for _, n := range names {
				if j := f.job(ids[n]); j.Status == status.JobQueued || j.Status == status.JobRunning {
					f.finish(ids[n], status.JobSuccess, t0)
				}
			}
		}
		jobs, err := f.st.ListJobs(f.ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Status == status.JobPending || j.Status == status.JobQueued || j.Status == status.JobRunning {
				t.Fatalf("seed %d: job %s left %s", seed, j.JobName, j.Status)
			}
		}
		want, _ := DeriveRunStatus(jobs)
		got := f.run(run.ID)
		if got.Status != want {
			t.Errorf("seed %d: run %s, derived %s", seed, got.Status, want)
		}
		f.mu.Lock()
		n := len(f.finished)
		f.mu.Unlock()
		if n != 1 {
			t.Errorf("seed %d: run completion fired %d times, want exactly once", seed, n)
		}
	}
}
