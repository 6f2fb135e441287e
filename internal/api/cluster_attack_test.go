package api

import (
	"context"
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
func (c storeCluster) Self() string { return "n1" }
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
