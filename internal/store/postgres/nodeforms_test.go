package postgres_test

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// A node id whose row a process that reads compressed step-log chunks
// wrote, then restarted with a release before them (whose heartbeat
// statement, copied here, never names compressed_logs_since), reads as a
// node that does not read them: the other nodes must stop compressing.
func TestNodeRestartedByAnOlderReleaseDoesNotReadCompressedLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pool.get(t).s
	started := time.Now().UTC().Truncate(time.Millisecond)
	n := &store.ClusterNode{ID: "node-forms", Address: "http://a:1", Version: "new", StartedAt: started, HeartbeatAt: started, ReadsCompressedLogs: true}
	if _, err := s.HeartbeatNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if !readsCompressed(t, s, "node-forms") {
		t.Fatal("the new release's heartbeat does not read as reading compressed logs")
	}
	restarted := started.Add(time.Minute)
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO cluster_nodes (id, address, version, started_at, heartbeat_at, jobs_running, agents_connected)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version, started_at = excluded.started_at,
			heartbeat_at = excluded.heartbeat_at, jobs_running = excluded.jobs_running, agents_connected = excluded.agents_connected
		RETURNING draining`, "node-forms", "http://a:1", "old", restarted, restarted, 0, 0); err != nil {
		t.Fatal(err)
	}
	if readsCompressed(t, s, "node-forms") {
		t.Fatal("after the older release's heartbeat the node still reads as reading compressed logs")
	}
}

// readsCompressed is the registry's word on node id.
func readsCompressed(t *testing.T, s store.Store, id string) bool {
	t.Helper()
	nodes, err := s.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == id {
			return n.ReadsCompressedLogs
		}
	}
	t.Fatalf("node %s not in the registry", id)
	return false
}
