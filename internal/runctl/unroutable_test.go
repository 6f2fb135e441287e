package runctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// TestUnroutableJobFailsAfterGrace: a queued job whose routing reason says
// nothing can serve it fails with that reason once it stayed so for the
// grace, long before the queue timeout; a job that became routable in
// between starts its grace again, and other queued jobs are untouched.
func TestUnroutableJobFailsAfterGrace(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: time.Hour, UnroutableGrace: 10 * time.Minute})
	ctx := context.Background()
	f.addRun(t, "r1", 0)
	setReason := func(id, r string) {
		if _, err := f.st.UpdateJobStatus(ctx, id, []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &r}); err != nil {
			t.Fatal(err)
		}
	}
	unroutable := "unroutable: no agent online; no scaler label set serves runsOn [gpu]"
	setReason("r1-build", unroutable)
	setReason("r1-lint", "all matching agents busy")
	f.c.SweepUnroutable(ctx) // first seen now
	f.now = f.now.Add(6 * time.Minute)
	f.c.SweepUnroutable(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("failed before the grace: %s", j.Status)
	}
	// Routable for a moment (an agent with the labels came and went): the
	// grace starts again.
	setReason("r1-build", "all matching agents busy")
	f.c.SweepUnroutable(ctx)
	setReason("r1-build", unroutable)
	f.now = f.now.Add(time.Minute)
	f.c.SweepUnroutable(ctx)
	f.now = f.now.Add(9 * time.Minute)
	f.c.SweepUnroutable(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("failed %v after becoming unroutable again, grace 10m: %s", 9*time.Minute, j.Status)
	}
	f.now = f.now.Add(2 * time.Minute)
	f.c.SweepUnroutable(ctx)
	j := f.job(t, "r1-build")
	if j.Status != status.JobFailed || !strings.HasPrefix(j.ErrorMessage, unroutable) || !strings.Contains(j.ErrorMessage, "10m0s") {
		t.Fatalf("unroutable job = %s %q, want failed with its reason", j.Status, j.ErrorMessage)
	}
	if l := f.job(t, "r1-lint"); l.Status != status.JobQueued {
		t.Fatalf("a routable job was ended: %s", l.Status)
	}
	// Off with a zero grace.
	g := newFixture(t, Config{QueueTimeout: time.Hour})
	g.addRun(t, "r2", 0)
	if _, err := g.st.UpdateJobStatus(ctx, "r2-build", []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &unroutable}); err != nil {
		t.Fatal(err)
	}
	g.c.SweepUnroutable(ctx)
	g.now = g.now.Add(30 * time.Minute)
	g.c.SweepUnroutable(ctx)
	if j := g.job(t, "r2-build"); j.Status != status.JobQueued {
		t.Fatalf("grace 0 ended the job: %s", j.Status)
	}
}
