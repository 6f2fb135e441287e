package api

import (
	"errors"
	"io"
	"net/http"

	"kici.dev/kici/internal/cluster"
)

// getClusterSettings answers GET /api/v1/admin/cluster-settings:
// {settings:{<knob>: value|null}, effective:{…}, defaults:{…}, version,
// updatedAt} (see docs/kici-compatibility.md#clustering).
func (s *server) getClusterSettings(w http.ResponseWriter, r *http.Request) {
	if s.d.ClusterSettings == nil {
		writeError(w, http.StatusServiceUnavailable, "Cluster settings not available")
		return
	}
	v, err := s.d.ClusterSettings.View(r.Context())
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// patchClusterSettings answers PATCH /api/v1/admin/cluster-settings: a
// strict JSON object of knobs (number sets, null resets); 400 on unknown
// fields, non-integers or out-of-range values, nothing changed then.
func (s *server) patchClusterSettings(w http.ResponseWriter, r *http.Request) {
	if s.d.ClusterSettings == nil {
		writeError(w, http.StatusServiceUnavailable, "Cluster settings not available")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "Request body too large")
			return
		}
		writeError(w, http.StatusBadRequest, "Unreadable body")
		return
	}
	v, err := s.d.ClusterSettings.Patch(r.Context(), body)
	if err != nil {
		var pe *cluster.PatchError
		if errors.As(err, &pe) {
			writeError(w, http.StatusBadRequest, pe.Msg)
			return
		}
		s.internalError(w, r, err)
		return
	}
	s.log.Info("cluster settings changed", "version", v.Version, "requestId", w.Header().Get(RequestIDHeader))
	writeJSON(w, http.StatusOK, v)
}

// listScalers answers GET /api/v1/admin/scalers with what each scaler is
// doing (scaler.Status: caps, active/spawning/queued agents, counters).
func (s *server) listScalers(w http.ResponseWriter, r *http.Request) {
	if s.d.ScalerStatus == nil {
		writeError(w, http.StatusServiceUnavailable, "Scaler not available")
		return
	}
	writeJSON(w, http.StatusOK, scalersView(s.d.ScalerStatus()))
}
