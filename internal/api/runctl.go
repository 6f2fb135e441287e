package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/store"
)

// RunController cancels runs and holds drain mode (implemented by
// runctl.Controller).
type RunController interface {
	// CancelRun cancels a run and returns its status afterwards
	// (cancelling or a terminal status); runctl.ErrRunNotFound,
	// runctl.ErrRunTerminal.
	CancelRun(ctx context.Context, runID string, force bool, by string) (string, error)
	// Drain returns the drain snapshot.
	Drain() runctl.DrainStatus
	// SetDraining turns drain mode on or off and returns the snapshot.
	SetDraining(on bool) runctl.DrainStatus
}

func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if s.d.RunControl == nil {
		writeError(w, http.StatusServiceUnavailable, "Run control not available")
		return
	}
	var req apitypes.CancelRequest
	if r.ContentLength != 0 {
		if !decodeBody(w, r, &req) {
			return
		}
	}
	by := "admin"
	if p, ok := auth.PrincipalFrom(r.Context()); ok && p.Label != "" {
		by = p.Label
	}
	status, err := s.d.RunControl.CancelRun(r.Context(), r.PathValue("runId"), req.Force, by)
	switch {
	case errors.Is(err, runctl.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "Run not found")
	case errors.Is(err, runctl.ErrRunTerminal):
		writeError(w, http.StatusConflict, "Run already finished")
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, apitypes.CancelResponse{RunID: r.PathValue("runId"), Status: status, Force: req.Force})
	}
}

func (s *server) getDrain(w http.ResponseWriter, r *http.Request) {
	if s.d.RunControl == nil {
		writeError(w, http.StatusServiceUnavailable, "Drain control not available")
		return
	}
	if s.d.Cluster != nil {
		s.clusterDrain(w, r, nil)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ClusterDrainStatus{DrainStatus: s.d.RunControl.Drain()})
}

func (s *server) postDrain(w http.ResponseWriter, r *http.Request) {
	if s.d.RunControl == nil {
		writeError(w, http.StatusServiceUnavailable, "Drain control not available")
		return
	}
	var req apitypes.DrainRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if s.d.Cluster != nil && (req.Action == "drain" || req.Action == "resume") {
		s.clusterDrain(w, r, &req)
		return
	}
	if req.Node != "" {
		writeError(w, http.StatusBadRequest, "node: this orchestrator has no node registry")
		return
	}
	switch req.Action {
	case "drain":
		writeJSON(w, http.StatusOK, apitypes.ClusterDrainStatus{DrainStatus: s.d.RunControl.SetDraining(true)})
	case "resume":
		writeJSON(w, http.StatusOK, apitypes.ClusterDrainStatus{DrainStatus: s.d.RunControl.SetDraining(false)})
	default:
		writeError(w, http.StatusBadRequest, `Invalid action: must be "drain" or "resume"`)
	}
}

// Rerunner creates reruns (implemented by ingest.Processor).
type Rerunner interface {
	// Rerun creates a new run of runID's workflow at its commit;
	// ingest.ErrRunNotFound, ingest.ErrRunNotFinished,
	// ingest.ErrRerunUnavailable.
	Rerun(ctx context.Context, runID, by string) (*store.Run, error)
}

// FailedRerunner reruns only the jobs that did not succeed and their
// dependents (ingest.Processor.RerunFailed); a Rerunner that implements
// it serves POST …/rerun?failed=true.
type FailedRerunner interface {
	RerunFailed(ctx context.Context, runID, by string) (*store.Run, error)
}

func (s *server) rerunRun(w http.ResponseWriter, r *http.Request) {
	if s.d.Rerun == nil {
		writeError(w, http.StatusServiceUnavailable, "Rerun not available")
		return
	}
	by := "admin"
	if p, ok := auth.PrincipalFrom(r.Context()); ok && p.Label != "" {
		by = p.Label
	}
	parent := r.PathValue("runId")
	rerun := s.d.Rerun.Rerun
	if f := r.URL.Query().Get("failed"); f == "true" || f == "1" {
		fr, ok := s.d.Rerun.(FailedRerunner)
		if !ok {
			writeError(w, http.StatusServiceUnavailable, "Rerun of failed jobs not available")
			return
		}
		rerun = fr.RerunFailed
	}
	run, err := rerun(r.Context(), parent, by)
	switch {
	case errors.Is(err, ingest.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "Run not found")
	case errors.Is(err, ingest.ErrRunNotFinished):
		writeError(w, http.StatusConflict, "Run has not finished: cancel it or wait for it first")
	case errors.Is(err, ingest.ErrRerunUnavailable):
		writeError(w, http.StatusUnprocessableEntity, "Run cannot be rerun: "+strings.TrimPrefix(err.Error(), ingest.ErrRerunUnavailable.Error()+": "))
	case err != nil:
		s.internalError(w, r, err)
	default:
		v := NewRunView(run)
		v.ParentRunID = &parent
		writeJSON(w, http.StatusCreated, apitypes.RerunResponse{Run: v, ParentRunID: parent})
	}
}

// parentOf returns the parent run id of a rerun, or nil.
func (s *server) parentOf(ctx context.Context, runID string) *string {
	l, err := s.d.Store.GetRunLink(ctx, runID)
	if err != nil {
		return nil
	}
	return &l.ParentRunID
}
