package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// ArtifactService lists and opens run artifacts (jobblobs.Service).
type ArtifactService interface {
	// ListArtifacts returns a run's unexpired artifacts, oldest first.
	ListArtifacts(ctx context.Context, runID string) ([]*store.Artifact, error)
	// OpenArtifact returns an artifact and its bytes (the final Read
	// checks the recorded sha256); an error wrapping store.ErrNotFound
	// when the run has none of that name (or it expired).
	OpenArtifact(ctx context.Context, runID, name string) (*store.Artifact, io.ReadCloser, error)
}

func artifactView(a *store.Artifact) apitypes.ArtifactView {
	return apitypes.ArtifactView{Name: a.Name, RunID: a.RunID, JobID: a.JobID, JobName: a.JobName, SizeBytes: a.SizeBytes,
		SHA256: a.SHA256, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt}
}

// runOr404 answers 404 unless the run exists.
func (s *server) runOr404(w http.ResponseWriter, r *http.Request, runID string) bool {
	if _, err := s.d.Store.GetRun(r.Context(), runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "Run not found")
			return false
		}
		s.internalError(w, r, err)
		return false
	}
	return true
}

// GET /api/v1/admin/runs/{runId}/artifacts ⇒ {artifacts:[apitypes.ArtifactView]}
func (s *server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	if s.d.Artifacts == nil {
		writeError(w, http.StatusServiceUnavailable, "Artifacts not available")
		return
	}
	runID := r.PathValue("runId")
	if !s.runOr404(w, r, runID) {
		return
	}
	list, err := s.d.Artifacts.ListArtifacts(r.Context(), runID)
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.ArtifactView, 0, len(list))
	for _, a := range list {
		out = append(out, artifactView(a))
	}
	writeJSON(w, http.StatusOK, apitypes.ArtifactList{Artifacts: out})
}

// GET /api/v1/admin/runs/{runId}/artifacts/{name} ⇒ the archive
// (application/zstd: a zstd-compressed tar), with X-Kici-Sha256. A digest
// mismatch found while streaming aborts the connection.
func (s *server) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	if s.d.Artifacts == nil {
		writeError(w, http.StatusServiceUnavailable, "Artifacts not available")
		return
	}
	runID, name := r.PathValue("runId"), r.PathValue("name")
	if !s.runOr404(w, r, runID) {
		return
	}
	a, rc, err := s.d.Artifacts.OpenArtifact(r.Context(), runID, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		s.internalError(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/zstd")
	w.Header().Set("Content-Length", strconv.FormatInt(a.SizeBytes, 10))
	w.Header().Set("Content-Disposition", `attachment; filename="`+a.Name+`.tar.zst"`)
	w.Header().Set("X-Kici-Sha256", a.SHA256)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Warn("artifact download aborted", "run", runID, "name", name, "err", err)
		panic(http.ErrAbortHandler)
	}
}
