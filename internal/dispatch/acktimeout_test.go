package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
)

// The ack deadline follows the live cluster setting dispatch_ack_timeout_ms,
// read per dispatch: a job dispatched under the 60 s default keeps its 60 s
// deadline; after the knob is lowered to 1 s through the cluster-settings
// reader (no restart), the next dispatch is requeued and its agent closed
// with 4031 about a second later.
func TestAckTimeoutFollowsClusterSetting(t *testing.T) {
	var reader atomic.Pointer[cluster.Reader]
	h := newHarness(t, Config{AckTimeout: 10 * time.Minute, AckTimeoutFunc: func(ctx context.Context) time.Duration {
		return reader.Load().Duration(ctx, cluster.DispatchAckTimeoutMs)
	}}, nil)
	ctx := context.Background()
	reader.Store(cluster.NewReader(h.st, cluster.Defaults{cluster.DispatchAckTimeoutMs: 60_000}, time.Hour, nil))

	patient := h.agent("patient", h.staticToken(), "a")
	j1 := h.job("a")
	h.enqueue(j1)
	patient.dispatch()
	e1 := h.entry(j1.ID)
	if e1.AckDeadline == nil {
		t.Fatal("dispatched entry has no ack deadline")
	}
	if left := time.Until(*e1.AckDeadline); left < 50*time.Second || left > 61*time.Second {
		t.Fatalf("ack deadline under the 60 s default is %s away", left)
	}

	if _, err := reader.Load().Patch(ctx, []byte(`{"dispatchAckTimeoutMs":1000}`)); err != nil {
		t.Fatal(err)
	}
	slow := h.agent("slow", h.staticToken(), "b")
	j2 := h.job("b")
	start := time.Now()
	h.enqueue(j2)
	slow.dispatch()
	if e2 := h.entry(j2.ID); e2.AckDeadline == nil || time.Until(*e2.AckDeadline) > 1100*time.Millisecond {
		t.Fatalf("ack deadline after lowering the knob: %+v", e2.AckDeadline)
	}
	code, _ := slow.closed()
	if code != protocol.CloseAckTimeout {
		t.Fatalf("close %d, want 4031", code)
	}
	if took := time.Since(start); took < 900*time.Millisecond || took > 4*time.Second {
		t.Fatalf("requeued after %s, want about 1 s", took)
	}
	wait.For(t, 5*time.Second, "requeued", func() bool { return h.entry(j2.ID).Status == store.QueuePending })
	// The first dispatch kept the deadline it was given.
	if e := h.entry(j1.ID); e.Status != store.QueueDispatched || e.AgentID != "patient" {
		t.Fatalf("first job's entry changed: %+v", e)
	}
}
