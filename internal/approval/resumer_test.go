package approval

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// heldReads counts the resumer's reads of held jobs: one per sweep.
type heldReads struct {
	store.Store
	n atomic.Int32
}

func (s *heldReads) ListJobsByStatus(ctx context.Context, st []status.Job) ([]*store.Job, error) {
	s.n.Add(1)
	return s.Store.ListJobsByStatus(ctx, st)
}

// An idle resumer leaves the store alone until a job is held; the held
// job's timer is then acted on within a sweep interval, and once nothing
// is held the resumer is idle again.
func TestResumerSweepsOnlyWhileWorkWaits(t *testing.T) {
	h := newHarness(t)
	var clock atomic.Int64
	clock.Store(h.now.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	h.gate.now = now
	reads := &heldReads{Store: h.st}
	res := NewResumer(reads, h.tr, h.gate.TrySlot, nil)
	res.now = now
	h.gate.OnWaiting(res.Expect)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { defer close(done); res.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	wait.For(t, 10*time.Second, "the first sweep", func() bool { return reads.n.Load() == 1 })
	// A run whose job passes its gate is no work for the resumer.
	_, plain := h.runNamed("run-plain", store.TrustTrusted, map[string][]string{"build": nil})
	if !h.enq.queued(plain["build"].ID) {
		t.Fatal("a job without contexts was not queued")
	}
	wait.Elapse(ctx, 2500*time.Millisecond)
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("idle, with nothing held, the resumer swept %d times in 2.5 s, want once (at its start)", n)
	}

	// Told of work (the gate does so just before the tracker records a
	// check to retry), it sweeps a second later and once more after that,
	// even when the first finds nothing; then it is idle again.
	res.Expect()
	wait.For(t, 15*time.Second, "two sweeps after Expect", func() bool { return reads.n.Load() >= 3 })
	wait.Elapse(ctx, 2500*time.Millisecond)
	if n := reads.n.Load(); n != 3 {
		t.Fatalf("after Expect with nothing to do the resumer swept %d times, want 2", n-1)
	}

	waitSecs := int64(60)
	h.context(&store.Context{Name: "staging", Enabled: true, WaitTimerSeconds: &waitSecs})
	_, jobs := h.runNamed("run-timer", store.TrustTrusted, map[string][]string{"deploy": {"staging"}})
	if st := h.job(jobs["deploy"].ID).Status; st != status.JobHeld {
		t.Fatalf("the job under a wait timer is %s, want held", st)
	}
	// Idle, the next sweep would be a minute away: the held job brings them
	// to one a second, and keeps them there while it is held.
	held := reads.n.Load()
	wait.For(t, 15*time.Second, "three sweeps while the job is held", func() bool { return reads.n.Load() >= held+3 })
	clock.Add(int64(61 * time.Second))
	wait.For(t, 15*time.Second, "the job to be released when its timer ran out", func() bool {
		return h.enq.queued(jobs["deploy"].ID)
	})
	// The sweep after the release finds nothing held; then no more.
	released := reads.n.Load()
	wait.For(t, 15*time.Second, "the sweep after the release", func() bool { return reads.n.Load() > released })
	wait.Elapse(ctx, 1500*time.Millisecond)
	settled := reads.n.Load()
	wait.Elapse(ctx, 2500*time.Millisecond)
	if n := reads.n.Load(); n != settled {
		t.Fatalf("with nothing held again the resumer swept %d more times in 2.5 s, want none", n-settled)
	}
}
