package apitypes

import "time"

// ClusterDrainStatus is the answer of GET and POST /orchestrator/drain.
// On an orchestrator with a node registry it also names the node that
// answered and lists every node's drain state; without one (a single
// node) Node and Nodes are absent and the answer is the DrainStatus alone.
type ClusterDrainStatus struct {
	DrainStatus
	// Node is the id of the node that answered.
	Node string `json:"node,omitempty"`
	// Nodes is every node of the cluster (present, possibly empty, with a
	// node registry).
	Nodes []ClusterNode `json:"nodes,omitzero"`
}

// ClusterNodeList is the body of GET /cluster/nodes: Self is the id of the
// node that answered, Nodes every node as last reported by its heartbeat.
// Without a node registry Self is "" and Nodes empty.
type ClusterNodeList struct {
	Self  string        `json:"self"`
	Nodes []ClusterNode `json:"nodes"`
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
