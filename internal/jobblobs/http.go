package jobblobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"kici.dev/kici/internal/blobstore"
)

// Agent routes, authenticated with the job credential of job.dispatch
// (Authorization: Bearer kjc_…) and bound to the job in the path. Bodies
// stream both ways; the 25 MiB admin body cap does not apply (KiCI exempts
// its cache-blob routes too), each route has its own limit.
const (
	// CachePath: GET ?key=K&restoreKey=P… restores (200 with the body,
	// 404 on a miss); PUT ?key=K saves the body.
	CachePath = "/api/v1/jobs/{jobId}/cache"
	// ArtifactPath: PUT uploads the job's artifact, GET downloads an
	// artifact of the job's run that the job declares in `download:`.
	ArtifactPath = "/api/v1/jobs/{jobId}/artifacts/{name}"
)

// Response headers of a download.
const (
	HeaderSHA256   = "X-Kici-Sha256"
	HeaderCacheKey = "X-Kici-Cache-Key"
	// HeaderCacheExact is "true" when the restored key is the requested
	// key in the job's own scope (the agent then skips the save).
	HeaderCacheExact = "X-Kici-Cache-Exact"
)

// Mount registers the agent routes on mux, each wrapped by wrap (request
// ids, panic recovery) when it is not nil.
func (s *Service) Mount(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(h http.Handler) http.Handler { return h }
	}
	mux.Handle("GET "+CachePath, wrap(s.withJob(s.getCache)))
	mux.Handle("PUT "+CachePath, wrap(s.withJob(s.putCache)))
	mux.Handle("GET "+ArtifactPath, wrap(s.withJob(s.getArtifact)))
	mux.Handle("PUT "+ArtifactPath, wrap(s.withJob(s.putArtifact)))
}

func (s *Service) withJob(h func(http.ResponseWriter, *http.Request, *jobCtx)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeErr(w, http.StatusUnauthorized, "a job credential is required (Authorization: Bearer kjc_…)")
			return
		}
		jc, err := s.authenticate(r.Context(), strings.TrimSpace(tok), r.PathValue("jobId"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, jc)
	})
}

func (s *Service) getCache(w http.ResponseWriter, r *http.Request, jc *jobCtx) {
	q := r.URL.Query()
	hit, err := s.RestoreCache(r.Context(), jc, q.Get("key"), q["restoreKey"])
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set(HeaderCacheKey, hit.Entry.Key)
	w.Header().Set(HeaderCacheExact, strconv.FormatBool(hit.Exact))
	s.stream(w, r, hit.Body, hit.Entry.SizeBytes, hit.Entry.SHA256)
}

func (s *Service) putCache(w http.ResponseWriter, r *http.Request, jc *jobCtx) {
	e, err := s.SaveCache(r.Context(), jc, r.URL.Query().Get("key"), r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": e.Key, "scope": e.Scope, "sizeBytes": e.SizeBytes, "sha256": e.SHA256})
}

func (s *Service) getArtifact(w http.ResponseWriter, r *http.Request, jc *jobCtx) {
	a, rc, err := s.JobArtifact(r.Context(), jc, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.stream(w, r, rc, a.SizeBytes, a.SHA256)
}

func (s *Service) putArtifact(w http.ResponseWriter, r *http.Request, jc *jobCtx) {
	a, err := s.UploadArtifact(r.Context(), jc, r.PathValue("name"), r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// Stream writes body (size bytes, digest sha) as the response. The digest
// is checked while streaming; a mismatch aborts the connection, so the
// client sees a broken transfer, never a complete corrupted one.
func (s *Service) stream(w http.ResponseWriter, r *http.Request, body io.ReadCloser, size int64, sha string) {
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set(HeaderSHA256, sha)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, body); err != nil {
		s.log.Warn("blob download aborted", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// refusedBodyDrain is how much of a refused upload's remaining body fail
// reads and discards after answering. An agent streams its archive while
// the orchestrator may refuse it mid-stream (over a limit): closing the
// connection with unread bytes makes the kernel reset it, which can
// destroy the answer before the agent reads it, so the agent would see
// "connection reset" instead of the reason. Past this many bytes the
// connection is closed anyway (the HTTP guard does it).
const refusedBodyDrain = 8 << 20

// fail maps an error to its status. For a request with a body still being
// sent it answers first and then drains up to refusedBodyDrain of it, so
// the client reads the reason.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Body != nil && r.Body != http.NoBody {
		rc := http.NewResponseController(w)
		if rc.EnableFullDuplex() == nil {
			defer func() {
				_ = rc.Flush()
				_, _ = io.CopyN(io.Discard, r.Body, refusedBodyDrain)
			}()
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, ErrUnauthorized):
		writeErr(w, http.StatusUnauthorized, "invalid job credential: "+err.Error())
	case errors.Is(err, ErrForbidden):
		writeErr(w, http.StatusForbidden, err.Error())
	case errors.Is(err, ErrMiss):
		writeErr(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrExists):
		writeErr(w, http.StatusConflict, err.Error())
	case errors.Is(err, blobstore.ErrTooLarge), errors.As(err, &mbe):
		writeErr(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, ErrLimit):
		writeErr(w, http.StatusInsufficientStorage, err.Error())
	default:
		s.log.Error("blob request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeErr(w, http.StatusInternalServerError, fmt.Sprintf("internal error (%s)", r.Method))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
