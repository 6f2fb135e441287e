package orchestrator

import (
	"context"
	"slices"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
)

// HeartbeatInterval is how often a node refreshes its registry row and
// picks up a drain set through another node.
const HeartbeatInterval = 5 * time.Second

// NodeLiveFor is how long after its last heartbeat a node counts as alive:
// three heartbeat intervals, so one late beat does not mark it dead.
const NodeLiveFor = 3 * HeartbeatInterval

// nodeAlive reports whether n heartbeated within NodeLiveFor of now.
func nodeAlive(n *store.ClusterNode, now time.Time) bool {
	return now.Sub(n.HeartbeatAt) < NodeLiveFor
}

// clusterNodes is the node registry as the admin API sees it.
type clusterNodes struct{ s *Server }

// drainApplyWait bounds how long a drain change waits for the nodes
// concerned to apply it and refresh their rows.
const drainApplyWait = 3 * time.Second

// msgDrainChanged (bus): body is the node id whose drain flag changed, ""
// for every node; the nodes concerned beat at once, applying it.
const msgDrainChanged = "node.drain"

// Nodes lists every node of the cluster.
func (c clusterNodes) Nodes(ctx context.Context) ([]*store.ClusterNode, error) {
	return c.s.store.ListNodes(ctx)
}

// Leases lists the named leases.
func (c clusterNodes) Leases(ctx context.Context) ([]*store.Lease, error) {
	return c.s.store.ListLeases(ctx)
}

// Self is this node's id.
func (c clusterNodes) Self() string { return c.s.nodeID }

// AliveWithin is NodeLiveFor.
func (c clusterNodes) AliveWithin() time.Duration { return NodeLiveFor }

// RemoveNode deletes a node's registry row.
func (c clusterNodes) RemoveNode(ctx context.Context, id string) error {
	return c.s.store.RemoveNode(ctx, id)
}

// SetDraining sets drain mode on node (every node when ""), in the
// registry; this node applies it at once, the others when the cluster bus
// tells them (or at their next heartbeat when a message is lost). It
// waits up to drainApplyWait for every live node concerned to beat after
// the change, so the answer carries their own running counts.
// store.ErrNotFound for an unknown node.
func (c clusterNodes) SetDraining(ctx context.Context, node string, on bool) error {
	set := time.Now()
	c.s.drainMu.Lock()
	err := c.s.store.SetNodeDraining(ctx, node, on)
	if err == nil && (node == "" || node == c.s.nodeID) {
		c.s.runctl.SetDraining(on)
	}
	c.s.drainMu.Unlock()
	if err != nil {
		return err
	}
	c.s.heartbeat(ctx) // this node's row carries the change and its count now
	if c.s.peers == nil {
		return nil
	}
	if err := c.s.peers.bus.Publish(ctx, msgDrainChanged, node); err != nil {
		c.s.log.Warn("drain change not announced; the other nodes apply it at their next heartbeat", "err", err)
		return nil
	}
	c.waitApplied(ctx, node, set, drainApplyWait)
	return nil
}

// Refresh has every live node heartbeat now (bus message msgDrainChanged
// for every node, which carries no change) and waits for their rows, at
// most refreshWait.
func (c clusterNodes) Refresh(ctx context.Context) {
	set := time.Now()
	c.s.heartbeat(ctx)
	if c.s.peers == nil {
		return
	}
	if err := c.s.peers.bus.Publish(ctx, msgDrainChanged, ""); err != nil {
		return
	}
	c.waitApplied(ctx, "", set, refreshWait)
}

// refreshWait bounds Refresh's wait for the other nodes' rows.
const refreshWait = time.Second

// waitApplied polls until every live node concerned (node, or all when
// "") has beaten since set, or for at most wait.
func (c clusterNodes) waitApplied(ctx context.Context, node string, set time.Time, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && !c.applied(ctx, node, set) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// applied reports whether every live node concerned by a drain change at
// set has beaten since.
func (c clusterNodes) applied(ctx context.Context, node string, set time.Time) bool {
	nodes, err := c.s.store.ListNodes(ctx)
	if err != nil {
		return false
	}
	for _, n := range nodes {
		if (node == "" || n.ID == node) && nodeAlive(n, time.Now()) && n.HeartbeatAt.Before(set) {
			return false
		}
	}
	return true
}

// onDrainChanged beats at once when a drain change concerns this node, so
// it applies the flag without waiting for its next heartbeat.
func (s *Server) onDrainChanged(ctx context.Context, node string) {
	if node == "" || node == s.nodeID {
		s.heartbeat(ctx)
	}
}

// heartbeat refreshes this node's registry row and applies the drain flag
// stored there; the first beat registers the node before it dispatches.
func (s *Server) heartbeat(ctx context.Context) {
	// Serialised with SetDraining: a beat that read the flag before a drain
	// was stored must not apply the old value after it.
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	// The agent URLs are read before the row is written: whoever sees this
	// beat's time in the registry knows that agents spawned from then on
	// carry every node that was registered before it.
	now := time.Now().UTC()
	s.refreshAgentURLs(ctx)
	draining, err := s.store.HeartbeatNode(ctx, &store.ClusterNode{ID: s.nodeID, Address: s.advertisedURL(), Version: Version,
		StartedAt: s.startedAt, HeartbeatAt: now, JobsRunning: s.dispatcher.JobsRunning(),
		AgentsConnected: s.dispatcher.AgentCount()})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("node heartbeat", "err", err)
		}
		return
	}
	draining = draining || s.stopping.Load()
	if draining != s.dispatcher.Draining() {
		s.runctl.SetDraining(draining)
	}
}

// otherLiveNodes lists the nodes of the registry other than this one that
// heartbeated within NodeLiveFor.
func (s *Server) otherLiveNodes(ctx context.Context) ([]*store.ClusterNode, error) {
	nodes, err := s.store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return slices.DeleteFunc(nodes, func(n *store.ClusterNode) bool { return n.ID == s.nodeID || !nodeAlive(n, now) }), nil
}

// refreshAgentURLs gives agents spawned from now on every live node's URL
// (this node's first), so they fail over to another node if this one dies.
// An explicit KICI_ORCHESTRATOR_URL (one URL, a load balancer, or a list)
// is left as the operator set it.
func (s *Server) refreshAgentURLs(ctx context.Context) {
	if s.cfg.OrchestratorURL != "" || s.peers == nil {
		return
	}
	others, err := s.otherLiveNodes(ctx)
	if err != nil {
		return
	}
	urls := []string{wsURLOf(s.advertisedURL())}
	for _, n := range others {
		if n.Address != "" {
			urls = append(urls, wsURLOf(n.Address))
		}
	}
	s.scaler.SetOrchestratorURL(strings.Join(urls, ","))
}

// wsURLOf turns a node's base URL (http://host:port, https://host:port)
// into its agent WebSocket URL (ws://host:port/ws, wss://host:port/ws).
func wsURLOf(base string) string {
	return "ws" + strings.TrimPrefix(strings.TrimSuffix(base, "/"), "http") + "/ws"
}

// runHeartbeat beats every HeartbeatInterval until ctx ends.
func (s *Server) runHeartbeat(ctx context.Context) {
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.heartbeat(ctx)
		}
	}
}
