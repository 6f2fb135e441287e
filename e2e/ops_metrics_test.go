package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// waitSample scrapes o until series satisfies cond and returns its value.
func waitSample(t *testing.T, o *orchestrator, timeout time.Duration, series string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	wait.For(t, timeout, series+" to move", func() bool {
		v = sample(scrape(t, o), series)
		return cond(v)
	})
	return v
}

// The operator's metrics exist and move: the scheduler lease is held by
// exactly one of two nodes and moves to the other when its holder stops;
// the nodes count alive and dead by heartbeat, a stopped node's heartbeat
// age grows; the database is up with a ping latency, down while PostgreSQL
// is stopped and up again after; a delivery accepted but not processed is
// counted with its age until a node processes it.
func TestOperatorMetricsMove(t *testing.T) {
	pg := pgtest.NewServer(t)
	dbURL := pg.URL(t)
	db := "KICI_DATABASE_URL=" + dbURL
	a := startIn(t, t.TempDir(), db)
	b := startIn(t, t.TempDir(), db)
	nodes := []*orchestrator{a, b}

	// Leader: one of the two.
	leader := -1
	wait.For(t, 15*time.Second, "one scheduler leader", func() bool {
		sum := 0.0
		for i, o := range nodes {
			v := sample(scrape(t, o), `kici_orch_leader{lease="scheduler"}`)
			if v == 1 {
				leader = i
			}
			if v >= 0 {
				sum += v
			}
		}
		return sum == 1
	})
	for _, o := range nodes {
		waitSample(t, o, 15*time.Second, `kici_orch_cluster_nodes{state="alive"}`, func(v float64) bool { return v == 2 })
		text := scrape(t, o)
		if v := sample(text, `kici_orch_cluster_nodes{state="dead"}`); v != 0 {
			t.Fatalf("dead nodes with both up: %v", v)
		}
		if v := sample(text, `kici_orch_database_up`); v != 1 {
			t.Fatalf("kici_orch_database_up = %v with PostgreSQL up", v)
		}
		if v := sample(text, `kici_orch_database_ping_seconds`); v <= 0 {
			t.Fatalf("kici_orch_database_ping_seconds = %v, want a latency", v)
		}
		if v := sample(text, `kici_orch_deliveries_pending`); v != 0 {
			t.Fatalf("kici_orch_deliveries_pending = %v with nothing accepted", v)
		}
	}

	// A delivery accepted a minute ago and held by a claim of a node that
	// is not processing it (a stalled node): counted with its age.
	st, err := postgres.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id string
	for i := 0; id == ""; i++ {
		if i == 3 {
			t.Fatal("the nodes took every test delivery before the test could claim it")
		}
		received := time.Now().Add(-time.Minute).UTC()
		did := fmt.Sprintf("ops-metrics-%d", i)
		d := &store.Delivery{ID: did, SourceID: "no-such-source", OrgID: "acme", Event: "push", Payload: []byte(`{}`), Status: store.DeliveryReceived, ReceivedAt: received}
		e := &store.EventLogEntry{ID: did, DeliveryID: did, OrgID: "acme", Event: "push", Source: "direct", Provider: "github", Status: store.EventLogReceived, ReceivedAt: received}
		if err := st.AcceptDelivery(context.Background(), d, e); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.ClaimDelivery(context.Background(), did, "stalled-node", time.Minute); err != nil {
			t.Fatal(err)
		} else if ok {
			id = did
		}
	}
	text := scrape(t, a)
	if n, age := sample(text, `kici_orch_deliveries_pending`), sample(text, `kici_orch_deliveries_pending_oldest_age_seconds`); n < 1 || age < 60 {
		t.Fatalf("a delivery pending for a minute: pending %v, oldest age %v s; want at least 1, >= 60", n, age)
	}
	// Released, a node processes it (it fails: no such source) and the
	// gauge goes back to 0.
	if err := st.ReleaseDeliveryClaim(context.Background(), id, "stalled-node"); err != nil {
		t.Fatal(err)
	}
	waitSample(t, a, 30*time.Second, `kici_orch_deliveries_pending`, func(v float64) bool { return v == 0 })
	if v := sample(scrape(t, a), `kici_orch_deliveries_pending_oldest_age_seconds`); v != 0 {
		t.Fatalf("oldest pending age %v with none pending, want 0", v)
	}

	// The leader stops: the other node leads; it counts the stopped node
	// dead once its heartbeat is older than the liveness window.
	other := nodes[1-leader]
	nodes[leader].stop(t)
	waitSample(t, other, 15*time.Second, `kici_orch_leader{lease="scheduler"}`, func(v float64) bool { return v == 1 })
	waitSample(t, other, 40*time.Second, `kici_orch_cluster_nodes{state="dead"}`, func(v float64) bool { return v == 1 })
	if v := sample(scrape(t, other), `kici_orch_cluster_nodes{state="alive"}`); v != 1 {
		t.Fatalf("alive nodes after one stopped: %v", v)
	}
	if !strings.Contains(scrape(t, other), "kici_orch_cluster_node_heartbeat_age_seconds{node=") {
		t.Fatal("no per-node heartbeat age")
	}

	// The database stops, then comes back.
	pg.Stop(t)
	waitSample(t, other, 15*time.Second, `kici_orch_database_up`, func(v float64) bool { return v == 0 })
	if v := sample(scrape(t, other), `kici_orch_database_ping_seconds`); v != -1 {
		t.Fatalf("kici_orch_database_ping_seconds = %v with the database down, want absent", v)
	}
	pg.Start(t)
	waitSample(t, other, 30*time.Second, `kici_orch_database_up`, func(v float64) bool { return v == 1 })
}

// With KICI_LOG_FORMAT=json, the reason a process cannot start is a JSON
// record too, for the orchestrator and for an agent (the spawned agents'
// own log lines are checked by TestMetricsAfterAPushAndJSONLogs).
func TestFatalStartErrorsHonourJSONLogFormat(t *testing.T) {
	for _, c := range []struct {
		bin string
		env []string
	}{
		{"kici-orchestrator", []string{"KICI_DATA_DIR=" + t.TempDir(), "KICI_PORT=not-a-port"}},
		{"kici-agent", []string{"KICI_WORK_DIR=" + t.TempDir()}}, // no KICI_ORCHESTRATOR_URL
	} {
		cmd := exec.Command(filepath.Join(binDir, c.bin))
		cmd.Env = append(append(cleanEnv(), "KICI_LOG_FORMAT=json"), c.env...)
		code, out := exitCode(t, cmd)
		if code == 0 {
			t.Fatalf("%s started with a bad configuration:\n%s", c.bin, out)
		}
		line := strings.TrimSpace(out)
		if strings.Contains(line, "\n") || !strings.HasPrefix(line, "{") || !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"program":"`+c.bin+`"`) {
			t.Fatalf("%s's start-up error is not one JSON record:\n%s", c.bin, out)
		}
	}
}
