package agentsessions

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The rules a node applies to a registration, read from the shared table:
// the resume token another node issued is recognised (and only with the
// same agent token); a session is live elsewhere only while its node holds
// it and that node's heartbeat is fresh; Release by a node that no longer
// holds it changes nothing.
func TestSessionsSharedAcrossNodes(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := st.HeartbeatNode(ctx, &store.ClusterNode{ID: n, Address: "http://" + n, Version: "t", StartedAt: now, HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, url, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(tokenID, presented, node string, wantExists, wantResumed, wantElsewhere bool) {
		t.Helper()
		exists, resumed, elsewhere, err := s.Check(ctx, "agent-1", tokenID, presented, node)
		if err != nil {
			t.Fatal(err)
		}
		if exists != wantExists || resumed != wantResumed || elsewhere != wantElsewhere {
			t.Fatalf("Check(%s, %q, %s) = exists %v resumed %v elsewhere %v; want %v %v %v",
				tokenID, presented, node, exists, resumed, elsewhere, wantExists, wantResumed, wantElsewhere)
		}
	}
	check("tok-1", "", "node-b", false, false, false)
	if err := s.Hold(ctx, "agent-1", "tok-1", "krs_secret", "node-a"); err != nil {
		t.Fatal(err)
	}
	check("tok-1", "krs_secret", "node-b", true, true, true)  // failover with the token
	check("tok-1", "", "node-b", true, false, true)           // a second holder of the agent token
	check("tok-2", "krs_secret", "node-b", true, false, true) // the resume token of another agent token
	check("tok-1", "krs_other", "node-a", true, false, false) // on the holding node itself
	// Node A stops beating (killed): its sessions stop counting as live.
	old := now.Add(-time.Minute)
	if _, err := st.HeartbeatNode(ctx, &store.ClusterNode{ID: "node-a", Address: "http://node-a", Version: "t", StartedAt: old, HeartbeatAt: old}); err != nil {
		t.Fatal(err)
	}
	check("tok-1", "", "node-b", true, false, false)
	if _, err := st.HeartbeatNode(ctx, &store.ClusterNode{ID: "node-a", Address: "http://node-a", Version: "t", StartedAt: now, HeartbeatAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "agent-1", "node-b"); err != nil { // not the holder
		t.Fatal(err)
	}
	check("tok-1", "", "node-b", true, false, true)
	if err := s.Release(ctx, "agent-1", "node-a"); err != nil {
		t.Fatal(err)
	}
	check("tok-1", "", "node-b", true, false, false)
	if err := s.End(ctx, "agent-1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	check("tok-1", "krs_secret", "node-b", false, false, false)
}
