package store

import (
	"context"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// ClusterNode is one orchestrator of the cluster (cluster_nodes), the
// row its heartbeat writes; the admin API serves it as it is.
type ClusterNode = apitypes.ClusterNode

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
