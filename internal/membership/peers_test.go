package membership

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/clusterbus"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Enqueue wake-ups go out while other nodes may be listening (before the
// first heartbeat, or when it found some) and not while the last
// heartbeat found this node alone: each would be a statement per job for
// nobody.
func TestEnqueuedWakesOtherNodesOnlyWhenThereAreSome(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	p, err := OpenPeers(ctx, url, "node-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.bus.Close(); p.sessions.Close() })
	listener, err := clusterbus.Open(ctx, url, "node-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(listener.Close)
	got := make(chan string, 8)
	listener.Handle(msgJobEnqueued, func(m clusterbus.Message) { got <- m.Body })
	next := func() string {
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up arrived")
			return ""
		}
	}

	p.Enqueued(ctx, "job-before-any-heartbeat")
	if id := next(); id != "job-before-any-heartbeat" {
		t.Fatalf("first wake-up = %q", id)
	}
	p.setOthers(0)
	p.Enqueued(ctx, "job-while-alone")
	p.setOthers(1)
	p.Enqueued(ctx, "job-with-a-peer")
	// Each publish returns after its NOTIFY committed, so one sent while
	// alone would arrive before the next.
	if id := next(); id != "job-with-a-peer" {
		t.Fatalf("wake-up %q sent while the node was alone", id)
	}
	p.setOthers(-1) // a heartbeat that could not list the nodes
	p.Enqueued(ctx, "job-unknown")
	if id := next(); id != "job-unknown" {
		t.Fatalf("wake-up = %q", id)
	}
}
