package orchestrator

import (
	"context"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
)

// HeartbeatInterval is how often a node refreshes its registry row and
// picks up a drain set through another node.
const HeartbeatInterval = 5 * time.Second

// clusterNodes is the node registry as the admin API sees it.
type clusterNodes struct{ s *Server }

// Nodes lists every node of the cluster.
func (c clusterNodes) Nodes(ctx context.Context) ([]*store.ClusterNode, error) {
	return c.s.store.ListNodes(ctx)
}

// Self is this node's id.
func (c clusterNodes) Self() string { return c.s.nodeID }

// SetDraining sets drain mode on node (every node when ""), in the
// registry; this node applies it at once, the others at their next
// heartbeat. store.ErrNotFound for an unknown node.
func (c clusterNodes) SetDraining(ctx context.Context, node string, on bool) error {
	c.s.drainMu.Lock()
	defer c.s.drainMu.Unlock()
	if err := c.s.store.SetNodeDraining(ctx, node, on); err != nil {
		return err
	}
	if node == "" || node == c.s.nodeID {
		c.s.runctl.SetDraining(on)
	}
	return nil
}

// heartbeat refreshes this node's registry row and applies the drain flag
// stored there; the first beat registers the node before it dispatches.
func (s *Server) heartbeat(ctx context.Context) {
	// Serialised with SetDraining: a beat that read the flag before a drain
	// was stored must not apply the old value after it.
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	draining, err := s.store.HeartbeatNode(ctx, &store.ClusterNode{ID: s.nodeID, Address: s.advertisedURL(), Version: Version,
		StartedAt: s.startedAt, HeartbeatAt: time.Now().UTC(), JobsRunning: s.dispatcher.JobsRunning()})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("node heartbeat", "err", err)
		}
		return
	}
	if draining != s.dispatcher.Draining() {
		s.runctl.SetDraining(draining)
	}
	s.refreshAgentURLs(ctx)
}

// refreshAgentURLs gives agents spawned from now on every live node's URL
// (this node's first), so they fail over to another node if this one dies.
// An explicit KICI_ORCHESTRATOR_URL (one URL, a load balancer, or a list)
// is left as the operator set it.
func (s *Server) refreshAgentURLs(ctx context.Context) {
	if s.cfg.OrchestratorURL != "" || s.peers == nil {
		return
	}
	nodes, err := s.store.ListNodes(ctx)
	if err != nil {
		return
	}
	urls := []string{wsURLOf(s.advertisedURL())}
	for _, n := range nodes {
		if n.ID != s.nodeID && time.Since(n.HeartbeatAt) < 3*HeartbeatInterval && n.Address != "" {
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
