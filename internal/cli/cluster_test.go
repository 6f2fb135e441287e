package cli

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// registry is the node registry over the harness's store, answering as
// node "n1".
type registry struct{ st store.Store }

func (r registry) Nodes(ctx context.Context) ([]*store.ClusterNode, error) {
	return r.st.ListNodes(ctx)
}
func (r registry) Leases(ctx context.Context) ([]*store.Lease, error) { return r.st.ListLeases(ctx) }
func (r registry) Self() string                                       { return "n1" }
func (r registry) AliveWithin() time.Duration                         { return 15 * time.Second }
func (r registry) Refresh(context.Context)                            {}
func (r registry) RemoveNode(ctx context.Context, id string) error    { return r.st.RemoveNode(ctx, id) }
func (r registry) SetDraining(ctx context.Context, node string, on bool) error {
	return r.st.SetNodeDraining(ctx, node, on)
}

// `cluster nodes` names the leader and marks a node whose heartbeat is
// 40 s old dead with that age; `cluster nodes remove` refuses the live
// answering node and removes the dead one; diagnose sums the live nodes
// and names the dead one.
func TestClusterNodesCommandShowsLivenessLeaderAndRemoves(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, n := range []*store.ClusterNode{
		{ID: "n1", Address: "http://n1:4000", Version: "t", StartedAt: now, HeartbeatAt: now, JobsRunning: 1, AgentsConnected: 2},
		{ID: "n2", Address: "http://n2:4000", Version: "t", StartedAt: now, HeartbeatAt: now.Add(-40 * time.Second), JobsRunning: 5, AgentsConnected: 3},
	} {
		if _, err := h.st.HeartbeatNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := h.st.AcquireLease(ctx, "scheduler", "n1", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	srv := httptest.NewServer(api.NewRouter(api.Deps{Store: h.st, Auth: auth.NewAdminAuth(h.st, nil), Cluster: registry{h.st}}))
	t.Cleanup(srv.Close)
	env := map[string]string{"KICI_ADMIN_URL": srv.URL, "KICI_ADMIN_TOKEN": h.token}

	out, errs, code := h.runEnv(env, "cluster", "nodes")
	if code != 0 || !strings.Contains(out, "leader: n1") {
		t.Fatalf("cluster nodes: exit %d %s\n%s", code, errs, out)
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "n1 *") && (!strings.Contains(line, "alive") || !strings.Contains(line, "scheduler")):
			t.Errorf("n1 row: %q, want alive holding scheduler", line)
		case strings.HasPrefix(line, "n2 ") && (!strings.Contains(line, "dead") || !strings.Contains(line, "40.")):
			t.Errorf("n2 row: %q, want dead with its 40 s heartbeat age", line)
		}
	}
	if out, _, _ := h.runEnv(env, "diagnose"); !strings.Contains(out, "cluster: 1 live node(s), 2 agent(s) connected, 1 job(s) running") ||
		!strings.Contains(out, "dead nodes: n2") {
		t.Errorf("diagnose:\n%s", out)
	}
	if _, errs, code := h.runEnv(env, "cluster", "nodes", "remove", "n1", "--force"); code == 0 || !strings.Contains(errs, "answering") {
		t.Errorf("remove of the answering node: exit %d %s", code, errs)
	}
	if out, errs, code := h.runEnv(env, "cluster", "nodes", "remove", "n2"); code != 0 || !strings.Contains(out, "node n2 removed") {
		t.Fatalf("remove n2: exit %d %s %s", code, out, errs)
	}
	if nodes, _ := h.st.ListNodes(ctx); len(nodes) != 1 || nodes[0].ID != "n1" {
		t.Fatalf("nodes after removal: %+v", nodes)
	}
}
