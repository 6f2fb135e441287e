package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// ClusterNodes is the node registry and cluster-wide drain (implemented by
// the orchestrator over store.NodeStore).
type ClusterNodes interface {
	// Nodes lists every node of the cluster.
	Nodes(ctx context.Context) ([]*store.ClusterNode, error)
	// Self is the id of the node answering.
	Self() string
	// SetDraining sets drain mode on node, or on every node when "";
	// store.ErrNotFound for an unknown node.
	SetDraining(ctx context.Context, node string, on bool) error
}

// getClusterNodes serves GET /cluster/nodes: {self, nodes} (none without
// a registry).
func (s *server) getClusterNodes(w http.ResponseWriter, r *http.Request) {
	if s.d.Cluster == nil {
		writeJSON(w, http.StatusOK, apitypes.ClusterNodeList{Nodes: []apitypes.ClusterNode{}})
		return
	}
	nodes, err := s.d.Cluster.Nodes(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ClusterNodeList{Self: s.d.Cluster.Self(), Nodes: clusterNodeViews(nodes)})
}

// clusterDrain answers a drain route through the registry: POST sets the
// flag (req.Node "" = every node), both answer apitypes.ClusterDrainStatus.
func (s *server) clusterDrain(w http.ResponseWriter, r *http.Request, req *apitypes.DrainRequest) {
	if req != nil {
		if err := s.d.Cluster.SetDraining(r.Context(), req.Node, req.Action == "drain"); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				writeError(w, http.StatusNotFound, fmt.Sprintf("Node %q not found (kici-admin cluster nodes lists them)", req.Node))
				return
			}
			s.internalError(w, r, err)
			return
		}
	}
	nodes, err := s.d.Cluster.Nodes(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ClusterDrainStatus{DrainStatus: drainView(s.d.RunControl.Drain()), Node: s.d.Cluster.Self(), Nodes: clusterNodeViews(nodes)})
}
