package storetest

import (
	"errors"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// testNodes covers NodeStore: a heartbeat creates then refreshes a node's
// row without touching its drain flag; a drain of one node reaches only it,
// a drain of "" every node; an unknown node is ErrNotFound.
func testNodes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a := &store.ClusterNode{ID: "node-a", Address: "http://a:1", Version: "v1", StartedAt: at(0), HeartbeatAt: at(1), JobsRunning: 2, AgentsConnected: 4}
	b := &store.ClusterNode{ID: "node-b", Address: "http://b:1", Version: "v1", StartedAt: at(0), HeartbeatAt: at(1)}
	for _, n := range []*store.ClusterNode{a, b} {
		if d, err := s.HeartbeatNode(ctx, n); err != nil || d {
			t.Fatalf("first heartbeat of %s: draining=%v err=%v", n.ID, d, err)
		}
	}
	must(t, s.SetNodeDraining(ctx, "node-b", true))
	if err := s.SetNodeDraining(ctx, "node-zz", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("drain of an unknown node: %v, want ErrNotFound", err)
	}
	a.HeartbeatAt, a.JobsRunning, b.HeartbeatAt = at(5), 3, at(5)
	if d, _ := s.HeartbeatNode(ctx, a); d {
		t.Fatal("node-a draining after node-b's drain")
	}
	if d, _ := s.HeartbeatNode(ctx, b); !d {
		t.Fatal("node-b's heartbeat cleared or missed its drain flag")
	}
	list, err := s.ListNodes(ctx)
	must(t, err)
	if len(list) != 2 || list[0].ID != "node-a" || !list[0].HeartbeatAt.Equal(at(5)) || list[0].JobsRunning != 3 || list[0].AgentsConnected != 4 ||
		list[0].Address != "http://a:1" || !list[0].StartedAt.Equal(at(0)) || list[0].Draining || !list[1].Draining {
		t.Fatalf("nodes = %+v %+v", list[0], list[len(list)-1])
	}
	// Whether a node reads compressed step-log chunks is what its last
	// heartbeat said.
	if list[0].ReadsCompressedLogs || list[1].ReadsCompressedLogs {
		t.Fatalf("nodes that never said they read compressed logs read as reading them: %+v %+v", list[0], list[1])
	}
	a.ReadsCompressedLogs = true
	_, err = s.HeartbeatNode(ctx, a)
	must(t, err)
	if list, _ = s.ListNodes(ctx); !list[0].ReadsCompressedLogs || list[1].ReadsCompressedLogs {
		t.Fatalf("after node-a said it reads compressed logs: %+v %+v", list[0], list[1])
	}
	a.ReadsCompressedLogs = false
	_, err = s.HeartbeatNode(ctx, a)
	must(t, err)
	if list, _ = s.ListNodes(ctx); list[0].ReadsCompressedLogs {
		t.Fatalf("node-a's heartbeat saying it does not read compressed logs left it reading as reading them: %+v", list[0])
	}
	must(t, s.SetNodeDraining(ctx, "", true))
	if d, _ := s.HeartbeatNode(ctx, a); !d {
		t.Fatal("cluster-wide drain did not reach node-a")
	}
	must(t, s.SetNodeDraining(ctx, "", false))
	list, _ = s.ListNodes(ctx)
	for _, n := range list {
		if n.Draining {
			t.Fatalf("%s still draining after the cluster-wide resume", n.ID)
		}
	}
	// A node gone for good is removed; its lease rows say who held what.
	if err := s.RemoveNode(ctx, "node-zz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove of an unknown node: %v, want ErrNotFound", err)
	}
	must(t, s.RemoveNode(ctx, "node-b"))
	list, _ = s.ListNodes(ctx)
	if len(list) != 1 || list[0].ID != "node-a" {
		t.Fatalf("after removing node-b: %+v", list)
	}
	ok, err := s.AcquireLease(ctx, "nodes-test-lease", "node-a", time.Hour)
	must(t, err)
	if !ok {
		t.Fatal("lease not acquired")
	}
	leases, err := s.ListLeases(ctx)
	must(t, err)
	found := false
	for _, l := range leases {
		if l.Name == "nodes-test-lease" {
			found = l.Holder == "node-a" && l.ExpiresAt.After(time.Now())
		}
	}
	if !found {
		t.Fatalf("leases = %+v, want nodes-test-lease held by node-a", leases)
	}
}
