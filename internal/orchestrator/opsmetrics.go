package orchestrator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kici.dev/kici/internal/membership"
)

// opsCollector reports, at scrape time, what an operator alerts on beyond
// the work counters of internal/servermetrics: whether this node leads, which nodes
// are alive by heartbeat, whether the database answers and how fast, and
// the deliveries accepted but not processed yet. Alert rules for them are
// in docs/operations.md.
type opsCollector struct {
	s *Server
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
	s := c.s
	leading := 0.0
	if s.ingress != nil && s.ingress.sched.Leading() {
		leading = 1
	}
	ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, leading, "scheduler")
	if s.dbHealth == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	p := s.dbHealth.probe(ctx)
	up := 0.0
	if p.err == nil && p.version >= s.dbHealth.db.ExpectedSchemaVersion() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, up)
	if p.err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(dbPingDesc, prometheus.GaugeValue, p.latency.Seconds())

	now := time.Now()
	if nodes, err := s.store.ListNodes(ctx); err == nil {
		alive, dead := 0, 0
		for _, n := range nodes {
			if membership.Alive(n, now) {
				alive++
			} else {
				dead++
			}
			ch <- prometheus.MustNewConstMetric(nodeAgeDesc, prometheus.GaugeValue, max(now.Sub(n.HeartbeatAt).Seconds(), 0), n.ID)
		}
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(alive), "alive")
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(dead), "dead")
	}
	if n, oldest, err := s.store.CountUnprocessedDeliveries(ctx); err == nil {
		age := 0.0
		if oldest != nil {
			age = max(now.Sub(*oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(pendingAgeDesc, prometheus.GaugeValue, age)
	}
}
