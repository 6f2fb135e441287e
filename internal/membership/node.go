package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/clusterbus"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/store"
)

// HeartbeatInterval is how often a node refreshes its registry row and
// picks up a drain set through another node.
const HeartbeatInterval = 5 * time.Second

// NodeLiveFor is how long after its last heartbeat a node counts as alive:
// three heartbeat intervals, so one late beat does not mark it dead.
const NodeLiveFor = 3 * HeartbeatInterval

// Alive reports whether n heartbeated within NodeLiveFor of now.
func Alive(n *store.ClusterNode, now time.Time) bool {
	return now.Sub(n.HeartbeatAt) < NodeLiveFor
}

// PlainOnlyHoldsFor is how long after its last heartbeat a node that does
// not read compressed step-log chunks still keeps every node from writing
// them: far longer than NodeLiveFor, because the two mistakes cost very
// differently. Counting a stalled or clock-skewed old node as gone makes
// the others write chunks it cannot read; counting a gone one as present
// only writes plain chunks a little longer. A node removed from the
// registry (kici-admin cluster nodes remove) stops holding at once.
const PlainOnlyHoldsFor = 10 * time.Minute

// drainApplyWait bounds how long a drain change waits for the nodes
// concerned to apply it and refresh their rows.
const drainApplyWait = 3 * time.Second

// refreshWait bounds Refresh's wait for the other nodes' rows.
const refreshWait = time.Second

// Dispatch is what a heartbeat reads of this node's dispatcher
// (dispatch.Dispatcher).
type Dispatch interface {
	// JobsRunning counts the jobs on this node's agents.
	JobsRunning() int
	// AgentCount counts the agents connected here.
	AgentCount() int
	// Draining reports drain mode.
	Draining() bool
}

// Drainer turns this node's drain mode on or off (runctl.Controller).
type Drainer interface {
	SetDraining(on bool) runctl.DrainStatus
}

// AgentURLs is told the URLs agents spawned from now on dial, this node's
// first (scaler.Manager).
type AgentURLs interface {
	SetOrchestratorURL(urls string)
}

// NodeConfig are a Node's collaborators, all required unless said.
type NodeConfig struct {
	// Store holds the node registry and the leases.
	Store store.Store
	// ID is this node's id; Version its build, StartedAt its start.
	ID, Version string
	StartedAt   time.Time
	// Address returns this node's base URL as other nodes' agents reach
	// it (KICI_CLUSTER_ADDRESS, else the listener's reachable URL).
	Address func() string
	// FixedAgentURL is KICI_ORCHESTRATOR_URL: when set, spawned agents
	// dial what the operator set rather than every live node.
	FixedAgentURL string
	// Dispatch, Drain and AgentURLs are this node's dispatcher, run
	// control and scaler.
	Dispatch  Dispatch
	Drain     Drainer
	AgentURLs AgentURLs
	// Peers are the other nodes; nil on one node.
	Peers *Peers
	// Stopping reports a graceful stop under way: the node drains,
	// whatever the registry says.
	Stopping func() bool
	// CompressedLogs, when not nil, is told at every heartbeat with peers
	// whether every other node that heartbeated within PlainOnlyHoldsFor
	// reads step-log chunks stored compressed (this one does), with the
	// ids of those that do not; when the registry cannot be read it is
	// told false. The PostgreSQL log store compresses only while they all
	// do (docs/logs.md).
	CompressedLogs func(everyNodeReads bool, plainOnly []string)
	// Logger logs heartbeat failures; nil discards.
	Logger *slog.Logger
}

// Node is this node's membership of the cluster: its registry row, kept
// fresh by heartbeats that also apply the drain flag stored there, the
// other nodes' liveness, and cluster-wide drain (the admin API's
// api.ClusterNodes). It is safe for concurrent use.
type Node struct {
	cfg NodeConfig
	log *slog.Logger

	drainMu sync.Mutex // drain changes vs heartbeats
}

// NewNode returns this node's membership; with peers, a drain change
// another node announces makes it beat at once.
func NewNode(cfg NodeConfig) *Node {
	n := &Node{cfg: cfg, log: cfg.Logger}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if p := cfg.Peers; p != nil {
		p.bus.Handle(msgDrainChanged, func(m clusterbus.Message) { n.onDrainChanged(p.ctx, m.Body) })
		p.bus.Handle(msgNodeJoined, func(clusterbus.Message) { n.Beat(p.ctx) })
	}
	return n
}

// Nodes lists every node of the cluster.
func (n *Node) Nodes(ctx context.Context) ([]*store.ClusterNode, error) {
	return n.cfg.Store.ListNodes(ctx)
}

// Leases lists the named leases.
func (n *Node) Leases(ctx context.Context) ([]*store.Lease, error) {
	return n.cfg.Store.ListLeases(ctx)
}

// Self is this node's id.
func (n *Node) Self() string { return n.cfg.ID }

// AliveWithin is NodeLiveFor.
func (n *Node) AliveWithin() time.Duration { return NodeLiveFor }

// RemoveNode deletes a node's registry row.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	return n.cfg.Store.RemoveNode(ctx, id)
}

// SetDraining sets drain mode on node (every node when ""), in the
// registry; this node applies it at once, the others when the cluster bus
// tells them (or at their next heartbeat when a message is lost). It
// waits up to drainApplyWait for every live node concerned to beat after
// the change, so the answer carries their own running counts.
// store.ErrNotFound for an unknown node.
func (n *Node) SetDraining(ctx context.Context, node string, on bool) error {
	set := time.Now()
	n.drainMu.Lock()
	err := n.cfg.Store.SetNodeDraining(ctx, node, on)
	if err == nil && (node == "" || node == n.cfg.ID) {
		n.cfg.Drain.SetDraining(on)
	}
	n.drainMu.Unlock()
	if err != nil {
		return err
	}
	n.Beat(ctx) // this node's row carries the change and its count now
	if n.cfg.Peers == nil {
		return nil
	}
	if err := n.cfg.Peers.bus.Publish(ctx, msgDrainChanged, node); err != nil {
		n.log.Warn("drain change not announced; the other nodes apply it at their next heartbeat", "err", err)
		return nil
	}
	n.waitApplied(ctx, node, set, drainApplyWait)
	return nil
}

// Refresh has every live node heartbeat now (bus message msgDrainChanged
// for every node, which carries no change) and waits for their rows, at
// most refreshWait.
func (n *Node) Refresh(ctx context.Context) {
	set := time.Now()
	n.Beat(ctx)
	if n.cfg.Peers == nil {
		return
	}
	if err := n.cfg.Peers.bus.Publish(ctx, msgDrainChanged, ""); err != nil {
		return
	}
	n.waitApplied(ctx, "", set, refreshWait)
}

// waitApplied polls until every live node concerned (node, or all when
// "") has beaten since set, or for at most wait.
func (n *Node) waitApplied(ctx context.Context, node string, set time.Time, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && !n.applied(ctx, node, set) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// applied reports whether every live node concerned by a drain change at
// set has beaten since.
func (n *Node) applied(ctx context.Context, node string, set time.Time) bool {
	nodes, err := n.cfg.Store.ListNodes(ctx)
	if err != nil {
		return false
	}
	for _, o := range nodes {
		if (node == "" || o.ID == node) && Alive(o, time.Now()) && o.HeartbeatAt.Before(set) {
			return false
		}
	}
	return true
}

// onDrainChanged beats at once when a drain change concerns this node, so
// it applies the flag without waiting for its next heartbeat.
func (n *Node) onDrainChanged(ctx context.Context, node string) {
	if node == "" || node == n.cfg.ID {
		n.Beat(ctx)
	}
}

// Join is the node's first heartbeat, which registers it, followed by a
// word to the other nodes, which beat at once: from then on they wake
// this node for the jobs they enqueue (Peers.Enqueued).
func (n *Node) Join(ctx context.Context) {
	n.Beat(ctx)
	if n.cfg.Peers == nil {
		return
	}
	if err := n.cfg.Peers.bus.Publish(ctx, msgNodeJoined, n.cfg.ID); err != nil {
		n.log.Warn("join not announced; the other nodes count this node at their next heartbeat", "err", err)
	}
}

// Beat refreshes this node's registry row and applies the drain flag
// stored there; the first beat registers the node before it dispatches.
func (n *Node) Beat(ctx context.Context) {
	// Serialised with SetDraining: a beat that read the flag before a drain
	// was stored must not apply the old value after it.
	n.drainMu.Lock()
	defer n.drainMu.Unlock()
	// The agent URLs are read before the row is written: whoever sees this
	// beat's time in the registry knows that agents spawned from then on
	// carry every node that was registered before it.
	now := time.Now().UTC()
	if n.cfg.Peers != nil {
		nodes, err := n.cfg.Store.ListNodes(ctx)
		if err != nil {
			n.cfg.Peers.setOthers(-1)
		} else {
			others := n.liveOthers(nodes, now)
			n.cfg.Peers.setOthers(len(others))
			n.refreshAgentURLs(others)
		}
		if ctx.Err() == nil {
			n.tellCompressedLogs(nodes, now, err)
		}
	}
	d := n.cfg.Dispatch
	draining, err := n.cfg.Store.HeartbeatNode(ctx, &store.ClusterNode{ID: n.cfg.ID, Address: n.cfg.Address(), Version: n.cfg.Version,
		StartedAt: n.cfg.StartedAt, HeartbeatAt: now, JobsRunning: d.JobsRunning(),
		AgentsConnected: d.AgentCount(), ReadsCompressedLogs: true})
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("node heartbeat", "err", err)
		}
		return
	}
	draining = draining || n.cfg.Stopping()
	if draining != d.Draining() {
		n.cfg.Drain.SetDraining(draining)
	}
}

// OtherLiveNodes lists the nodes of the registry other than this one that
// heartbeated within NodeLiveFor.
func (n *Node) OtherLiveNodes(ctx context.Context) ([]*store.ClusterNode, error) {
	nodes, err := n.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	return n.liveOthers(nodes, time.Now()), nil
}

// liveOthers keeps the nodes other than this one alive at now.
func (n *Node) liveOthers(nodes []*store.ClusterNode, now time.Time) []*store.ClusterNode {
	return slices.DeleteFunc(slices.Clone(nodes), func(o *store.ClusterNode) bool { return o.ID == n.cfg.ID || !Alive(o, now) })
}

// tellCompressedLogs tells CompressedLogs whether every other node of the
// registry nodes (read with err) that heartbeated within
// PlainOnlyHoldsFor of now reads compressed step-log chunks.
func (n *Node) tellCompressedLogs(nodes []*store.ClusterNode, now time.Time, err error) {
	if n.cfg.CompressedLogs == nil {
		return
	}
	if err != nil {
		n.cfg.CompressedLogs(false, nil)
		return
	}
	var plainOnly []string
	for _, o := range nodes {
		if o.ID != n.cfg.ID && !o.ReadsCompressedLogs && now.Sub(o.HeartbeatAt) < PlainOnlyHoldsFor {
			plainOnly = append(plainOnly, o.ID)
		}
	}
	n.cfg.CompressedLogs(len(plainOnly) == 0, plainOnly)
}

// refreshAgentURLs gives agents spawned from now on every live node's URL
// (this node's first, then others), so they fail over to another node if
// this one dies. An explicit KICI_ORCHESTRATOR_URL (one URL, a load
// balancer, or a list) is left as the operator set it.
func (n *Node) refreshAgentURLs(others []*store.ClusterNode) {
	if n.cfg.FixedAgentURL != "" {
		return
	}
	urls := []string{WSURL(n.cfg.Address())}
	for _, o := range others {
		if o.Address != "" {
			urls = append(urls, WSURL(o.Address))
		}
	}
	n.cfg.AgentURLs.SetOrchestratorURL(strings.Join(urls, ","))
}

// WSURL turns a node's base URL (http://host:port, https://host:port)
// into its agent WebSocket URL (ws://host:port/ws, wss://host:port/ws).
func WSURL(base string) string {
	return "ws" + strings.TrimPrefix(strings.TrimSuffix(base, "/"), "http") + "/ws"
}

// Run beats every HeartbeatInterval until ctx ends.
func (n *Node) Run(ctx context.Context) {
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.Beat(ctx)
		}
	}
}
