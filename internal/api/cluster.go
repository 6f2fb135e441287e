package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// LeaderLease is the lease whose holder the cluster view calls the leader:
// the scheduler's (internal/scheduler.LeaseName), the one node that fires
// schedules.
const LeaderLease = "scheduler"

// ClusterNodes is the node registry and cluster-wide drain (implemented by
// the orchestrator over store.NodeStore).
type ClusterNodes interface {
	// Nodes lists every node of the cluster.
	Nodes(ctx context.Context) ([]*store.ClusterNode, error)
	// Leases lists the named leases and their holders.
	Leases(ctx context.Context) ([]*store.Lease, error)
	// Self is the id of the node answering.
	Self() string
	// AliveWithin is how recent a node's heartbeat must be for it to
	// count as alive.
	AliveWithin() time.Duration
	// SetDraining sets drain mode on node, or on every node when "";
	// store.ErrNotFound for an unknown node. It returns once the nodes
	// concerned have applied it and refreshed their rows, or after a
	// short bound (a node that does not answer applies it at its next
	// heartbeat).
	SetDraining(ctx context.Context, node string, on bool) error
	// RemoveNode deletes a node's row; store.ErrNotFound for an unknown
	// node.
	RemoveNode(ctx context.Context, id string) error
	// Refresh asks every live node to heartbeat now and returns once they
	// did, or after a short bound, so rows read next carry current counts.
	Refresh(ctx context.Context)
}

// clusterView reads the registry and the leases and concludes each node's
// liveness at now.
func (s *server) clusterView(ctx context.Context) (apitypes.ClusterNodeList, error) {
	nodes, err := s.d.Cluster.Nodes(ctx)
	if err != nil {
		return apitypes.ClusterNodeList{}, err
	}
	leases, err := s.d.Cluster.Leases(ctx)
	if err != nil {
		return apitypes.ClusterNodeList{}, err
	}
	now := time.Now()
	within := s.d.Cluster.AliveWithin()
	out := apitypes.ClusterNodeList{Self: s.d.Cluster.Self(), Nodes: []apitypes.ClusterNodeStatus{}, Leases: []apitypes.ClusterLease{}}
	held := map[string][]string{}
	for _, l := range leases {
		expired := !l.ExpiresAt.After(now)
		out.Leases = append(out.Leases, apitypes.ClusterLease{Name: l.Name, Holder: l.Holder, ExpiresAt: l.ExpiresAt, Expired: expired})
		if !expired {
			held[l.Holder] = append(held[l.Holder], l.Name)
			if l.Name == LeaderLease {
				out.Leader = l.Holder
			}
		}
	}
	for _, n := range nodes {
		age := now.Sub(n.HeartbeatAt)
		st := apitypes.ClusterNodeStatus{ClusterNode: *n, Alive: age < within,
			HeartbeatAgeMs: max(age.Milliseconds(), 0), AliveWithinMs: within.Milliseconds(), Leases: held[n.ID]}
		if st.Leases == nil {
			st.Leases = []string{}
		}
		out.Nodes = append(out.Nodes, st)
	}
	return out, nil
}

// getClusterNodes serves GET /cluster/nodes (none without a registry).
func (s *server) getClusterNodes(w http.ResponseWriter, r *http.Request) {
	if s.d.Cluster == nil {
		writeJSON(w, http.StatusOK, apitypes.ClusterNodeList{Nodes: []apitypes.ClusterNodeStatus{}, Leases: []apitypes.ClusterLease{}})
		return
	}
	view, err := s.clusterView(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// removeClusterNode serves DELETE /cluster/nodes/{id}[?force=true]: a
// node whose heartbeat is fresh is refused (409) unless forced, since it
// would only add itself back; the answering node is always refused.
func (s *server) removeClusterNode(w http.ResponseWriter, r *http.Request) {
	if s.d.Cluster == nil {
		writeError(w, http.StatusNotFound, "This orchestrator has no node registry")
		return
	}
	id := r.PathValue("id")
	force := r.URL.Query().Get("force") == "true"
	if id == s.d.Cluster.Self() {
		writeError(w, http.StatusConflict, fmt.Sprintf("Node %q is the node answering this request; stop it, then remove it through another node", id))
		return
	}
	view, err := s.clusterView(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	for _, n := range view.Nodes {
		if n.ID == id && n.Alive && !force {
			writeError(w, http.StatusConflict, fmt.Sprintf("Node %q is alive (last heartbeat %d ms ago); stop it first, or pass force=true (kici-admin cluster nodes remove --force) — a running node adds itself back at its next heartbeat", id, n.HeartbeatAgeMs))
			return
		}
	}
	if err := s.d.Cluster.RemoveNode(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Node %q not found (kici-admin cluster nodes lists them)", id))
			return
		}
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ClusterNodeRemoved{Removed: id})
}

// clusterDrain answers a drain route through the registry: POST sets the
// flag (req.Node "" = every node), GET refreshes the rows first; both
// answer apitypes.ClusterDrainStatus: this node's live state, the
// cluster's total and every node's row.
func (s *server) clusterDrain(w http.ResponseWriter, r *http.Request, req *apitypes.DrainRequest) {
	if req == nil {
		s.d.Cluster.Refresh(r.Context())
	} else {
		if err := s.d.Cluster.SetDraining(r.Context(), req.Node, req.Action == "drain"); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				writeError(w, http.StatusNotFound, fmt.Sprintf("Node %q not found (kici-admin cluster nodes lists them)", req.Node))
				return
			}
			s.internalError(w, r, err)
			return
		}
	}
	view, err := s.clusterView(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	total := clusterDrainTotal(view.Nodes)
	writeJSON(w, http.StatusOK, apitypes.ClusterDrainStatus{DrainStatus: s.d.RunControl.Drain(), Node: view.Self,
		Cluster: &total, Nodes: view.Nodes})
}

// clusterDrainTotal is the cluster's drain snapshot: draining when every
// live node drains (and at least one lives), the live nodes' running jobs
// summed. A dead node's stale count is left out.
func clusterDrainTotal(nodes []apitypes.ClusterNodeStatus) apitypes.DrainStatus {
	var st apitypes.DrainStatus
	live, draining := 0, 0
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		live++
		st.JobsRunning += n.JobsRunning
		if n.Draining {
			draining++
		}
	}
	st.Draining = live > 0 && draining == live
	return st
}
