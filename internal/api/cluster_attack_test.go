package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// storeCluster is the node registry over the test store, as the
// orchestrator wires it (without a local dispatcher to drain).
type storeCluster struct{ st store.Store }

func (c storeCluster) Nodes(ctx context.Context) ([]*store.ClusterNode, error) {
	return c.st.ListNodes(ctx)
}
func (c storeCluster) Self() string               { return "n1" }
func (c storeCluster) AliveWithin() time.Duration { return 15 * time.Second }
func (c storeCluster) Refresh(context.Context)    {}
func (c storeCluster) Leases(ctx context.Context) ([]*store.Lease, error) {
	return c.st.ListLeases(ctx)
}
func (c storeCluster) RemoveNode(ctx context.Context, id string) error {
	return c.st.RemoveNode(ctx, id)
}
func (c storeCluster) SetDraining(ctx context.Context, node string, on bool) error {
	return c.st.SetNodeDraining(ctx, node, on)
}

// drainFlags returns each node's drain flag, by id.
func drainFlags(t *testing.T, st store.Store) map[string]bool {
	t.Helper()
	nodes, err := st.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range nodes {
		out[n.ID] = n.Draining
	}
	return out
}

// TestClusterRoutesRefuseTheUnauthorisedAndBadNodes: the node list needs
// an admin token (an agent token is no admin token); a drain, of one node
// or all, is refused to an anonymous caller, an agent token and an
// auditor; an owner naming a node that does not exist (or a malformed
// id) gets a 4xx; none of these changes any node's drain flag. An
// owner's drain of one node changes that node only. Cancelling a run is
// refused likewise, and the run control is never called.
func TestClusterRoutesRefuseTheUnauthorisedAndBadNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, id := range []string{"n1", "n2"} {
		if _, err := e.st.HeartbeatNode(ctx, &store.ClusterNode{ID: id, Address: "http://" + id, Version: "test",
			StartedAt: now, HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	agentTok, _, err := auth.NewAgentAuth(e.st).IssueStatic(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := &stubRunControl{}
	e.srv.Config.Handler = NewRouter(Deps{Store: e.st, Auth: authOf(t, e), RunControl: rc, Cluster: storeCluster{e.st}})
	const nodes, drain = "/api/v1/admin/cluster/nodes", "/api/v1/admin/orchestrator/drain"

	for _, tok := range []string{"", agentTok, "kici_" + strings.Repeat("0", 40)} {
		if code, _, _ := e.do("GET", nodes, tok, ""); code != 401 {
			t.Errorf("GET nodes with token %.12q: %d, want 401", tok, code)
		}
	}
	if code, m, _ := e.do("GET", nodes, e.auditor, ""); code != 200 || len(m["nodes"].([]any)) != 2 {
		t.Errorf("GET nodes as auditor: %d %v", code, m)
	}

	refused := []struct {
		token, body string
		code        int
	}{
		{"", `{"action":"drain","node":"n2"}`, 401},
		{agentTok, `{"action":"drain","node":"n2"}`, 401},
		{agentTok, `{"action":"drain"}`, 401},
		{e.auditor, `{"action":"drain","node":"n2"}`, 403},
		{e.auditor, `{"action":"drain"}`, 403},
		{e.owner, `{"action":"drain","node":"n3"}`, 404},
		{e.owner, `{"action":"drain","node":"N2"}`, 404},
		{e.owner, `{"action":"drain","node":"n2'; --"}`, 404},
		{e.owner, `{"action":"drain","node":"` + strings.Repeat("x", 5000) + `"}`, 404},
		{e.owner, `{"action":"drain","node":7}`, 400},
		{e.owner, `{"action":"drain","node":"n2","extra":1}`, 400},
		{e.owner, `{"action":"explode","node":"n2"}`, 400},
	}
	for _, c := range refused {
		code, _, _ := e.do("POST", drain, c.token, c.body)
		if code != c.code {
			t.Errorf("POST drain %.60s with token %.12q: %d, want %d", c.body, c.token, code, c.code)
		}
		if f := drainFlags(t, e.st); f["n1"] || f["n2"] || len(f) != 2 {
			t.Fatalf("after refused drain %.60s: flags %v", c.body, f)
		}
	}
	if rc.draining {
		t.Fatal("a refused request drained this node")
	}

	if code, m, _ := e.do("POST", drain, e.owner, `{"action":"drain","node":"n2"}`); code != 200 {
		t.Fatalf("owner drain n2: %d %v", code, m)
	}
	if f := drainFlags(t, e.st); f["n1"] || !f["n2"] {
		t.Fatalf("after owner drain of n2: flags %v", f)
	}

	for _, tok := range []string{"", agentTok, e.auditor} {
		code, _, _ := e.do("POST", "/api/v1/admin/runs/live/cancel", tok, `{"force":true}`)
		if code != 401 && code != 403 {
			t.Errorf("cancel with token %.12q: %d, want 401 or 403", tok, code)
		}
	}
	if len(rc.calls) != 0 {
		t.Fatalf("run control called by a refused cancel: %v", rc.calls)
	}
}

// The node list tells live from dead by heartbeat age and names the
// leader (the scheduler lease's holder); a drain status sums only live
// nodes' running jobs; removing a live node is refused unless forced,
// the answering node always, a dead one works and an unknown one is 404;
// an auditor may not remove.
func TestClusterNodesLivenessLeaderAndRemove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, n := range []*store.ClusterNode{
		{ID: "n1", Address: "http://n1", Version: "test", StartedAt: now, HeartbeatAt: now, JobsRunning: 1, AgentsConnected: 2},
		{ID: "n2", Address: "http://n2", Version: "test", StartedAt: now, HeartbeatAt: now, JobsRunning: 2, AgentsConnected: 3},
		{ID: "n3", Address: "http://n3", Version: "test", StartedAt: now.Add(-time.Hour), HeartbeatAt: now.Add(-30 * time.Second), JobsRunning: 7},
	} {
		if _, err := e.st.HeartbeatNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := e.st.AcquireLease(ctx, "scheduler", "n2", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	e.srv.Config.Handler = NewRouter(Deps{Store: e.st, Auth: authOf(t, e), RunControl: &stubRunControl{}, Cluster: storeCluster{e.st}})
	const nodes = "/api/v1/admin/cluster/nodes"

	code, m, _ := e.do("GET", nodes, e.auditor, "")
	if code != 200 || m["leader"] != "n2" || m["self"] != "n1" {
		t.Fatalf("GET nodes: %d leader %v self %v", code, m["leader"], m["self"])
	}
	alive := map[string]bool{}
	for _, raw := range m["nodes"].([]any) {
		n := raw.(map[string]any)
		alive[n["id"].(string)] = n["alive"].(bool)
		if n["id"] == "n3" && n["heartbeatAgeMs"].(float64) < 30000 {
			t.Errorf("n3 heartbeat age %v ms, want ≥ 30000", n["heartbeatAgeMs"])
		}
		if n["id"] == "n2" && fmt.Sprint(n["leases"]) != "[scheduler]" {
			t.Errorf("n2 leases %v, want [scheduler]", n["leases"])
		}
	}
	if !alive["n1"] || !alive["n2"] || alive["n3"] {
		t.Fatalf("liveness %v, want n1 and n2 alive, n3 dead", alive)
	}
	if code, m, _ := e.do("GET", "/api/v1/admin/orchestrator/drain", e.owner, ""); code != 200 || m["cluster"].(map[string]any)["jobsRunning"] != float64(3) {
		t.Errorf("drain status: %d cluster %v, want 3 jobs running (live nodes only)", code, m["cluster"])
	}

	for _, c := range []struct {
		token, path string
		code        int
	}{
		{e.auditor, nodes + "/n3", 403},
		{e.owner, nodes + "/n2", 409},
		{e.owner, nodes + "/n1?force=true", 409},
		{e.owner, nodes + "/nope", 404},
	} {
		if code, m, _ := e.do("DELETE", c.path, c.token, ""); code != c.code {
			t.Errorf("DELETE %s: %d %v, want %d", c.path, code, m, c.code)
		}
	}
	if ids := nodeIDs(t, e.st); ids != "n1,n2,n3" {
		t.Fatalf("after refused removals: %s", ids)
	}
	if code, m, _ := e.do("DELETE", nodes+"/n3", e.owner, ""); code != 200 || m["removed"] != "n3" {
		t.Fatalf("remove dead n3: %d %v", code, m)
	}
	if code, _, _ := e.do("DELETE", nodes+"/n2?force=true", e.owner, ""); code != 200 {
		t.Fatalf("forced removal of live n2: %d", code)
	}
	if ids := nodeIDs(t, e.st); ids != "n1" {
		t.Fatalf("after removals: %s, want n1", ids)
	}
}

func nodeIDs(t *testing.T, st store.Store) string {
	t.Helper()
	nodes, err := st.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return strings.Join(ids, ",")
}
