package apitypes

// ClusterDrainStatus is the answer of the drain routes with a node
// registry: this node's snapshot, its id, and every node's drain state.
type ClusterDrainStatus struct {
	DrainStatus
	// Node is the id of the node that answered.
	Node string `json:"node"`
	// Nodes is every node of the cluster.
	Nodes []ClusterNode `json:"nodes"`
}
