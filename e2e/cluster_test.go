package e2e

import (
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

type drainView struct {
	Draining bool   `json:"draining"`
	Node     string `json:"node"`
	Nodes    []struct {
		ID       string `json:"id"`
		Address  string `json:"address"`
		Draining bool   `json:"draining"`
	} `json:"nodes"`
}

// waitDraining waits until o's own dispatcher reports want.
func waitDraining(t *testing.T, o *orchestrator, want bool) drainView {
	t.Helper()
	var v drainView
	if !wait.Until(15*time.Second, func() bool {
		o.get(t, "/api/v1/admin/orchestrator/drain", &v)
		return v.Draining == want
	}) {
		t.Fatalf("node %s draining=%v after 15 s, want %v", v.Node, v.Draining, want)
	}
	return v
}

// Two orchestrators on one PostgreSQL: each lists both nodes; a drain
// through node A stops node B's dispatcher too (within a heartbeat), a
// resume of node B only through node A leaves A draining.
func TestClusterNodesAndDrainAcrossNodes(t *testing.T) {
	db := "KICI_DATABASE_URL=" + pgtest.URL(t)
	a := startIn(t, t.TempDir(), db)
	b := startIn(t, t.TempDir(), db)

	out := b.admin(t, "cluster", "nodes")
	if n := strings.Count(out, "http://"); n != 2 || !strings.Contains(out, a.url) || !strings.Contains(out, b.url) {
		t.Fatalf("cluster nodes through B lists %d nodes, want A and B:\n%s", n, out)
	}
	a.admin(t, "orchestrator", "drain")
	v := waitDraining(t, b, true)
	for _, n := range v.Nodes {
		if !n.Draining {
			t.Fatalf("node %s not draining after a cluster drain: %+v", n.ID, v.Nodes)
		}
	}
	status := b.admin(t, "orchestrator", "drain", "--status")
	if strings.Count(status, "true") != 2 {
		t.Fatalf("drain --status through B, want both nodes draining:\n%s", status)
	}

	// Resume only B, through A.
	a.admin(t, "orchestrator", "resume", "--node", v.Node)
	waitDraining(t, b, false)
	if st := waitDraining(t, a, true); st.Node == v.Node {
		t.Fatalf("A and B report the same node id %s", st.Node)
	}
	if msg := a.adminFails(t, "orchestrator", "drain", "--node", "no-such-node"); !strings.Contains(msg, "not found") {
		t.Fatalf("drain of an unknown node: %q, want not found", msg)
	}
}
