package store

import (
	"context"
	"time"
)

// ClusterNode is one orchestrator of the cluster as last reported by its
// heartbeat.
type ClusterNode struct {
	// ID is the node id (<KICI_DATA_DIR>/node-id).
	ID string `json:"id"`
	// Address is the node's base URL.
	Address string `json:"address"`
	// Version is the node's build version.
	Version string `json:"version"`
	// StartedAt is when the node process started.
	StartedAt time.Time `json:"startedAt"`
	// HeartbeatAt is the node's last heartbeat.
	HeartbeatAt time.Time `json:"lastHeartbeatAt"`
	// Draining is the node's drain mode; the node applies it at its next
	// heartbeat.
	Draining bool `json:"draining"`
	// JobsRunning counts jobs the node handed to agents and not finished,
	// as of its last heartbeat.
	JobsRunning int `json:"jobsRunning"`
}

// NodeStore is the node registry: every orchestrator heartbeats its row,
// and drain mode lives there, so a drain set through any node reaches all.
type NodeStore interface {
	// HeartbeatNode inserts or refreshes n's row (address, version,
	// started, heartbeat, jobs running; never the drain flag, which a new
	// row takes as false) and returns the row's drain flag.
	HeartbeatNode(ctx context.Context, n *ClusterNode) (draining bool, err error)
	// ListNodes returns every node, by id.
	ListNodes(ctx context.Context) ([]*ClusterNode, error)
	// SetNodeDraining sets the drain flag of node id, or of every node
	// when id is "". ErrNotFound when id names no node.
	SetNodeDraining(ctx context.Context, id string, on bool) error
}
