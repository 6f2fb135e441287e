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
	// AgentsConnected counts the agents connected to the node, as of its
	// last heartbeat.
	AgentsConnected int `json:"agentsConnected"`
}

// Lease is a named lease (the scheduler's, the retention sweeper's, …)
// and the node holding it until ExpiresAt.
type Lease struct {
	// Name is the lease name, e.g. "scheduler".
	Name string
	// Holder is the id of the node holding it.
	Holder string
	// ExpiresAt is when it lapses unless renewed.
	ExpiresAt time.Time
}

// NodeStore is the node registry: every orchestrator heartbeats its row,
// and drain mode lives there, so a drain set through any node reaches all.
type NodeStore interface {
	// HeartbeatNode inserts or refreshes n's row (address, version,
	// started, heartbeat, jobs running, agents connected; never the drain flag, which a new
	// row takes as false) and returns the row's drain flag.
	HeartbeatNode(ctx context.Context, n *ClusterNode) (draining bool, err error)
	// ListNodes returns every node, by id.
	ListNodes(ctx context.Context) ([]*ClusterNode, error)
	// SetNodeDraining sets the drain flag of node id, or of every node
	// when id is "". ErrNotFound when id names no node.
	SetNodeDraining(ctx context.Context, id string, on bool) error
	// RemoveNode deletes node id's row (a node gone for good, or a row
	// carried over by a restored database); a node still running adds it
	// back at its next heartbeat. ErrNotFound when id names no node.
	RemoveNode(ctx context.Context, id string) error
	// ListLeases returns every lease row, by name (expired ones included:
	// the caller compares ExpiresAt with the time).
	ListLeases(ctx context.Context) ([]*Lease, error)
}
