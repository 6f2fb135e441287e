package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/store"
)

// ManualRunner starts manual runs (ingest.Processor.StartManualRun).
type ManualRunner interface {
	StartManualRun(ctx context.Context, req ingest.ManualRun) (*store.Run, error)
}

// startManualRun answers 201 {run} for a started run; 400 for a bad body or
// inputs that do not satisfy the dispatch trigger (the message names each
// input), 404 for an unknown source or a ref that names no branch, tag or
// commit (the message names the ref), 422 when the run cannot be started
// (disabled source, no such workflow or no dispatch trigger, missing or
// invalid lock, App not installed on the repository). Permission: source.trigger, the permission of
// starting work on a source (KiCI has no manual-run permission; its
// nearest, scheduled_job.trigger, is for schedules).
func (s *server) startManualRun(w http.ResponseWriter, r *http.Request) {
	if s.d.ManualRuns == nil {
		writeError(w, http.StatusServiceUnavailable, "Manual runs not available")
		return
	}
	var req apitypes.ManualRunRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.SourceID) == "" || strings.TrimSpace(req.Workflow) == "" {
		writeError(w, http.StatusBadRequest, "sourceId and workflow are required")
		return
	}
	by := "admin"
	if p, ok := auth.PrincipalFrom(r.Context()); ok && p.Label != "" {
		by = p.Label
	}
	run, err := s.d.ManualRuns.StartManualRun(r.Context(), ingest.ManualRun{
		SourceID: req.SourceID, Workflow: req.Workflow, Ref: req.Ref, Repo: req.Repo, Inputs: req.Inputs, By: by,
	})
	switch {
	case errors.Is(err, ingest.ErrSourceNotFound):
		writeError(w, http.StatusNotFound, "Source not found")
	case errors.Is(err, ingest.ErrRefNotFound):
		writeError(w, http.StatusNotFound, "Ref not found: "+strings.TrimPrefix(err.Error(), ingest.ErrRefNotFound.Error()+": "))
	case errors.Is(err, ingest.ErrInvalidInputs):
		writeError(w, http.StatusBadRequest, "Invalid inputs: "+strings.TrimPrefix(err.Error(), ingest.ErrInvalidInputs.Error()+": "))
	case errors.Is(err, ingest.ErrManualRunUnavailable):
		writeError(w, http.StatusUnprocessableEntity, "Run cannot be started: "+strings.TrimPrefix(err.Error(), ingest.ErrManualRunUnavailable.Error()+": "))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusCreated, apitypes.RunEnvelope{Run: NewRunView(run)})
	}
}
