package servermetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/store"
)

// Ops are the sources of the figures an operator alerts on beyond the work
// counters of Metrics (RegisterOps): whether this node leads, which nodes
// are alive by heartbeat, whether the database answers and how fast, and
// the deliveries accepted but not processed yet. Alert rules for them are
// in docs/operations.md.
type Ops struct {
	// Leading reports whether this node holds the scheduler lease.
	Leading func() bool
	// Database probes the database within ctx: how long the round trip
	// took, whether the schema is at least this binary's, and an error
	// when it did not answer. Nil reports no database, node or delivery
	// figure.
	Database func(ctx context.Context) (latency time.Duration, schemaOK bool, err error)
	// Store holds the node registry and the deliveries.
	Store store.Store
	// AliveWithin is how recent a node's heartbeat must be for it to count
	// as alive (membership.NodeLiveFor).
	AliveWithin time.Duration
	// Timeout bounds one scrape's database reads.
	Timeout time.Duration
}

// RegisterOps registers on reg the collector of ops's figures, read at
// scrape time.
func RegisterOps(reg prometheus.Registerer, ops Ops) {
	reg.MustRegister(opsCollector{ops})
}

// opsCollector reports Ops's figures at scrape time.
type opsCollector struct {
	o Ops
}

var (
	leaderDesc = prometheus.NewDesc("kici_orch_leader",
		"1 when this node holds the lease (scheduler: fires schedule triggers; one node in the cluster), else 0.", []string{"lease"}, nil)
	nodesDesc = prometheus.NewDesc("kici_orch_cluster_nodes",
		"Nodes in the registry by state: alive (heartbeat within 15 s) or dead.", []string{"state"}, nil)
	nodeAgeDesc = prometheus.NewDesc("kici_orch_cluster_node_heartbeat_age_seconds",
		"Seconds since each registered node's last heartbeat (this node's included).", []string{"node"}, nil)
	dbUpDesc = prometheus.NewDesc("kici_orch_database_up",
		"1 when the database answered this node's probe within 2 s and its schema is at least this binary's, else 0 (the /ready database check).", nil, nil)
	dbPingDesc = prometheus.NewDesc("kici_orch_database_ping_seconds",
		"Duration of this node's last database round trip (one short query); absent when the database did not answer.", nil, nil)
	pendingDesc = prometheus.NewDesc("kici_orch_deliveries_pending",
		"Accepted deliveries (webhooks, schedule fires) not processed into runs yet, across the cluster.", nil, nil)
	pendingAgeDesc = prometheus.NewDesc("kici_orch_deliveries_pending_oldest_age_seconds",
		"Age of the oldest delivery not processed yet; 0 when none waits.", nil, nil)
)

// Describe sends the descriptors.
func (c opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, nodesDesc, nodeAgeDesc, dbUpDesc, dbPingDesc, pendingDesc, pendingAgeDesc} {
		ch <- d
	}
}

// Collect reads the figures. The database answers first: when it does not,
// only kici_orch_database_up 0 and the leader gauge are reported, rather
// than store-derived zeros that would look like an idle cluster.
func (c opsCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.o
	leading := 0.0
	if o.Leading() {
		leading = 1
	}
	ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, leading, "scheduler")
	if o.Database == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	latency, schemaOK, err := o.Database(ctx)
	up := 0.0
	if err == nil && schemaOK {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, up)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(dbPingDesc, prometheus.GaugeValue, latency.Seconds())

	now := time.Now()
	if nodes, err := o.Store.ListNodes(ctx); err == nil {
		alive, dead := 0, 0
		for _, n := range nodes {
			if now.Sub(n.HeartbeatAt) < o.AliveWithin {
				alive++
			} else {
				dead++
			}
			ch <- prometheus.MustNewConstMetric(nodeAgeDesc, prometheus.GaugeValue, max(now.Sub(n.HeartbeatAt).Seconds(), 0), n.ID)
		}
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(alive), "alive")
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(dead), "dead")
	}
	if n, oldest, err := o.Store.CountUnprocessedDeliveries(ctx); err == nil {
		age := 0.0
		if oldest != nil {
			age = max(now.Sub(*oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(pendingAgeDesc, prometheus.GaugeValue, age)
	}
}
