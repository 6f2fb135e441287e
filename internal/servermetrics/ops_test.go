package servermetrics

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// gauges reads every sample of name from reg, keyed by its one label
// value ("" without labels).
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key = l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// An operator's figures: the leader gauge always; with the database up,
// its ping, the nodes alive and dead by heartbeat and the pending
// deliveries; with it down, database_up 0 and nothing read from it.
func TestOpsReportsLeaderDatabaseNodesAndDeliveries(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	for id, beat := range map[string]time.Time{"a": now, "b": now.Add(-time.Minute)} {
		if _, err := st.HeartbeatNode(ctx, &store.ClusterNode{ID: id, StartedAt: beat, HeartbeatAt: beat}); err != nil {
			t.Fatal(err)
		}
	}
	var dbErr error
	reg := prometheus.NewRegistry()
	RegisterOps(reg, Ops{Store: st, AliveWithin: 15 * time.Second, Timeout: time.Second,
		Leading: func() bool { return true },
		Database: func(context.Context) (time.Duration, bool, error) {
			return 3 * time.Millisecond, true, dbErr
		}})

	if got := gauges(t, reg, "kici_orch_leader"); got["scheduler"] != 1 {
		t.Errorf("leader = %v, want scheduler 1", got)
	}
	if got := gauges(t, reg, "kici_orch_database_up"); got[""] != 1 {
		t.Errorf("database_up = %v, want 1", got)
	}
	if got := gauges(t, reg, "kici_orch_cluster_nodes"); got["alive"] != 1 || got["dead"] != 1 {
		t.Errorf("cluster_nodes = %v, want alive 1, dead 1", got)
	}
	if got := gauges(t, reg, "kici_orch_deliveries_pending"); got[""] != 0 || len(got) != 1 {
		t.Errorf("deliveries_pending = %v, want 0", got)
	}

	dbErr = errors.New("no answer within 2s")
	if got := gauges(t, reg, "kici_orch_database_up"); got[""] != 0 {
		t.Errorf("database down: database_up = %v, want 0", got)
	}
	if got := gauges(t, reg, "kici_orch_cluster_nodes"); len(got) != 0 {
		t.Errorf("database down: cluster_nodes = %v, want none (not zeros that look idle)", got)
	}
}
