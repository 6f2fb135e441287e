package apitypes

import "time"

// ClusterDrainStatus is the answer of GET and POST /orchestrator/drain:
// the DrainStatus of the node that answered (KiCI's {draining,
// jobsRunning}, live). On an orchestrator with a node registry Node names
// that node, Cluster totals the live nodes as the database shows them
// (Draining when every live node drains, JobsRunning summed) and Nodes
// lists every node's own state, refreshed just before the answer. Without
// one (a single node) Node, Cluster and Nodes are absent.
type ClusterDrainStatus struct {
	DrainStatus
	// Node is the id of the node that answered.
	Node string `json:"node,omitempty"`
	// Cluster is the live nodes' total.
	Cluster *DrainStatus `json:"cluster,omitempty"`
	// Nodes is every node of the cluster (present, possibly empty, with a
	// node registry).
	Nodes []ClusterNodeStatus `json:"nodes,omitzero"`
}

// ClusterNodeList is the body of GET /cluster/nodes: Self is the id of the
// node that answered, Nodes every node as last reported by its heartbeat
// with its liveness, Leader the node holding the scheduler lease (""
// when none does) and Leases every named lease. Without a node registry
// Self is "" and Nodes empty.
type ClusterNodeList struct {
	Self   string              `json:"self"`
	Leader string              `json:"leader"`
	Nodes  []ClusterNodeStatus `json:"nodes"`
	Leases []ClusterLease      `json:"leases"`
}

// ClusterNodeStatus is a node's registry row with what the answering node
// concludes from it: Alive when its last heartbeat is more recent than
// AliveWithinMs (three heartbeat intervals), HeartbeatAgeMs the time
// since that heartbeat, and the leases it holds.
type ClusterNodeStatus struct {
	ClusterNode
	Alive          bool     `json:"alive"`
	HeartbeatAgeMs int64    `json:"heartbeatAgeMs"`
	AliveWithinMs  int64    `json:"aliveWithinMs"`
	Leases         []string `json:"leases"`
}

// ClusterLease is a named lease and its holder: "scheduler" (the leader:
// schedules fire on it), "retention" (the sweeper). Expired when
// ExpiresAt has passed: nobody holds it until a node takes it.
type ClusterLease struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expiresAt"`
	Expired   bool      `json:"expired"`
}

// ClusterNodeRemoved is the answer of DELETE /cluster/nodes/{id}.
type ClusterNodeRemoved struct {
	Removed string `json:"removed"`
}

// ClusterSettingsView is the body of GET and PATCH /cluster-settings
// (KiCI cluster settings; cluster.View on the server). Every map is keyed
// by the knobs' camelCase wire names (agentTokenTtlMs, …); durations are
// in milliseconds and sizes in bytes, as the knob's name says.
type ClusterSettingsView struct {
	// Settings holds every knob, null when it is not overridden.
	Settings map[string]*int64 `json:"settings"`
	// Effective holds the value in force: the override, else the default.
	Effective map[string]int64 `json:"effective"`
	// Defaults holds the configured defaults (environment or built in).
	Defaults map[string]int64 `json:"defaults"`
	// Version counts the changes; UpdatedAt is the last one's time (null
	// while nothing was ever changed).
	Version   int64      `json:"version"`
	UpdatedAt *time.Time `json:"updatedAt"`
}
