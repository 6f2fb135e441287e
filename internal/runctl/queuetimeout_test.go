package runctl

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/store"
)

// The queue-timeout sweep reads the live cluster setting queue_timeout_ms
// on every pass: with the default (KICI_QUEUE_TIMEOUT_MS, 1 h here) a job
// queued two hours survives when the knob says 0 (never); lowered to one
// minute through the cluster-settings reader, the next pass expires it with
// the new timeout and its pending reason. No restart in between.
func TestQueueTimeoutFollowsClusterSetting(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: 10 * time.Hour})
	ctx := context.Background()
	r := cluster.NewReader(f.st, cluster.Defaults{cluster.QueueTimeoutMs: time.Hour.Milliseconds()}, time.Hour, nil)
	f.c.cfg.QueueTimeoutFunc = func(ctx context.Context) time.Duration { return r.Duration(ctx, cluster.QueueTimeoutMs) }
	f.addRun(t, "r1", 0)
	reason := "no agent with labels [gpu]"
	if _, err := f.st.UpdateJobStatus(ctx, "r1-build", []status.Job{status.JobQueued}, status.JobQueued, store.JobUpdate{PendingReason: &reason}); err != nil {
		t.Fatal(err)
	}

	// Default (1 h): 30 min in, nothing expires.
	f.now = f.now.Add(30 * time.Minute)
	f.c.SweepQueue(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("30 min in under the 1 h default: %s %q", j.Status, j.ErrorMessage)
	}
	// 0 = never: two hours in, still queued.
	if _, err := r.Patch(ctx, []byte(`{"queueTimeoutMs":0}`)); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(90 * time.Minute)
	f.c.SweepQueue(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("queueTimeoutMs=0 must never expire: %s %q", j.Status, j.ErrorMessage)
	}
	// Lowered to one minute: the next pass expires it.
	if _, err := r.Patch(ctx, []byte(`{"queueTimeoutMs":60000}`)); err != nil {
		t.Fatal(err)
	}
	f.c.SweepQueue(ctx)
	j := f.job(t, "r1-build")
	if j.Status != status.JobTimedOutStale || j.ErrorMessage != "queue timeout (1m0s) expired: "+reason {
		t.Fatalf("after lowering the knob: %s %q", j.Status, j.ErrorMessage)
	}
}

// Reset to its default (null), the knob falls back to the configured
// default (KICI_QUEUE_TIMEOUT_MS), not to the static Config value.
func TestQueueTimeoutResetUsesDefault(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: time.Minute})
	ctx := context.Background()
	r := cluster.NewReader(f.st, cluster.Defaults{cluster.QueueTimeoutMs: 0}, time.Hour, nil)
	f.c.cfg.QueueTimeoutFunc = func(ctx context.Context) time.Duration { return r.Duration(ctx, cluster.QueueTimeoutMs) }
	f.addRun(t, "r1", 0)
	if _, err := r.Patch(ctx, []byte(`{"queueTimeoutMs":1000}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Patch(ctx, []byte(`{"queueTimeoutMs":null}`)); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(24 * time.Hour)
	f.c.SweepQueue(ctx)
	if j := f.job(t, "r1-build"); j.Status != status.JobQueued {
		t.Fatalf("default 0 (KICI_QUEUE_TIMEOUT_MS=0) must never expire: %s %q", j.Status, j.ErrorMessage)
	}
}
