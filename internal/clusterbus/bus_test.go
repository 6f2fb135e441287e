package clusterbus

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A message one node publishes reaches the handler of its kind on every
// other node, never the sender's own; a body over MaxBody is refused.
func TestMessagesReachOtherNodesOnly(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	nodes := map[string]*Bus{}
	got := map[string]chan Message{}
	for _, id := range []string{"a", "b", "c"} {
		b, err := Open(ctx, url, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		ch := make(chan Message, 4)
		b.Handle("job.enqueued", func(m Message) { ch <- m })
		nodes[id], got[id] = b, ch
	}
	if err := nodes["a"].Publish(ctx, "job.enqueued", "job-1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "c"} {
		select {
		case m := <-got[id]:
			if m.From != "a" || m.Body != "job-1" || m.Kind != "job.enqueued" {
				t.Fatalf("node %s got %+v", id, m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("node %s never got the message", id)
		}
	}
	// The sender's own handler stays silent: a later message from b is the
	// first thing a sees.
	if err := nodes["b"].Publish(ctx, "job.enqueued", "job-2"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got["a"]:
		if m.Body != "job-2" {
			t.Fatalf("node a received %+v, its own message first", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node a never got node b's message")
	}
	if err := nodes["a"].Publish(ctx, "x", string(make([]byte, MaxBody+1))); err == nil {
		t.Fatal("an oversized body was published")
	}
}
