package jobblobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// ErrLimit is returned when an artifact upload would pass artifactMaxPerRun
// or the org's artifactQuotaBytes.
var ErrLimit = errors.New("artifact limit reached")

// UploadArtifact stores body as the job's artifact name, which the job
// must declare in `artifacts:`. The body is cut the moment it passes
// artifactMaxBytes or the org's remaining artifactQuotaBytes
// (blobstore.ErrTooLarge, nothing kept); the run may hold at most
// artifactMaxPerRun artifacts (ErrLimit); a name is uploaded once per run
// (ErrExists). The artifact expires artifactTtlMs after its upload.
func (s *Service) UploadArtifact(ctx context.Context, jc *jobCtx, name string, body io.Reader) (*store.Artifact, error) {
	if !slices.ContainsFunc(jc.cfg.Artifacts, func(a lockfile.Artifact) bool { return a.Name == name }) {
		return nil, fmt.Errorf("%w: job %q declares no artifact %q", ErrForbidden, jc.job.JobName, name)
	}
	if _, err := s.st.GetArtifact(ctx, jc.run.ID, name); err == nil {
		return nil, fmt.Errorf("%w: run %s already has an artifact %q", ErrExists, jc.run.ID, name)
	}
	maxPerRun := int(s.set.Int(ctx, cluster.ArtifactMaxPerRun))
	existing, err := s.st.ListArtifacts(ctx, jc.run.ID)
	if err != nil {
		return nil, err
	}
	if len(existing) >= maxPerRun {
		return nil, fmt.Errorf("%w: the run already has %d artifacts (artifactMaxPerRun %d)", ErrLimit, len(existing), maxPerRun)
	}
	quota := s.set.Int(ctx, cluster.ArtifactQuotaBytes)
	_, used, err := s.st.ArtifactUsage(ctx, jc.run.OrgID)
	if err != nil {
		return nil, err
	}
	limit, what := s.set.Int(ctx, cluster.ArtifactMaxBytes), "artifactMaxBytes"
	if left := quota - used; left < limit {
		limit, what = left, "the org's remaining artifactQuotaBytes"
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: the org's artifacts use %d of %d bytes (artifactQuotaBytes)", ErrLimit, used, quota)
	}
	id := uuid.NewString()
	blobKey := "artifacts/" + safeSegment(jc.run.OrgID) + "/" + safeSegment(jc.run.ID) + "/" + id
	info, err := s.blobs.Put(ctx, blobKey, body, limit)
	if errors.Is(err, blobstore.ErrTooLarge) {
		return nil, fmt.Errorf("artifact %q is larger than %s (%d bytes): %w", name, what, limit, err)
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	a := &store.Artifact{ID: id, OrgID: jc.run.OrgID, RunID: jc.run.ID, JobID: jc.job.ID, JobName: jc.job.JobName, Name: name,
		BlobKey: blobKey, SizeBytes: info.Size, SHA256: info.SHA256, CreatedAt: now,
		ExpiresAt: now.Add(time.Duration(s.set.Int(ctx, cluster.ArtifactTTLMs)) * time.Millisecond)}
	if err := s.st.InsertArtifact(ctx, a, maxPerRun, quota); err != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), blobKey)
		switch {
		case errors.Is(err, store.ErrConflict):
			return nil, fmt.Errorf("%w: run %s already has an artifact %q", ErrExists, jc.run.ID, name)
		case errors.Is(err, store.ErrLimit):
			return nil, fmt.Errorf("%w: artifactMaxPerRun (%d) or artifactQuotaBytes (%d) reached", ErrLimit, maxPerRun, quota)
		}
		return nil, err
	}
	return a, nil
}

// JobArtifact opens the artifact name of the job's run for a job that
// declares it in `download:`.
func (s *Service) JobArtifact(ctx context.Context, jc *jobCtx, name string) (*store.Artifact, io.ReadCloser, error) {
	if !slices.Contains(jc.cfg.Download, name) {
		return nil, nil, fmt.Errorf("%w: job %q does not download %q", ErrForbidden, jc.job.JobName, name)
	}
	return s.OpenArtifact(ctx, jc.run.ID, name)
}

// ListArtifacts returns a run's unexpired artifacts, oldest first.
func (s *Service) ListArtifacts(ctx context.Context, runID string) ([]*store.Artifact, error) {
	list, err := s.st.ListArtifacts(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, a := range list {
		if a.ExpiresAt.After(s.now()) {
			out = append(out, a)
		}
	}
	return out, nil
}

// OpenArtifact returns a run's artifact and a reader over its bytes that
// checks the recorded digest at its end; ErrMiss when there is none or it
// expired.
func (s *Service) OpenArtifact(ctx context.Context, runID, name string) (*store.Artifact, io.ReadCloser, error) {
	a, err := s.st.GetArtifact(ctx, runID, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !a.ExpiresAt.After(s.now())) {
		return nil, nil, fmt.Errorf("%w: run %s has no artifact %q", ErrMiss, runID, name)
	}
	if err != nil {
		return nil, nil, err
	}
	rc, err := s.blobs.Open(ctx, a.BlobKey, a.SHA256)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w: the bytes of artifact %q are gone", ErrMiss, name)
	}
	if err != nil {
		return nil, nil, err
	}
	return a, rc, nil
}

// Sweep deletes expired artifacts and caches, in batches. It returns how
// many artifacts and caches it removed.
func (s *Service) Sweep(ctx context.Context) (artifacts, caches int, err error) {
	for {
		list, err := s.st.ListExpiredArtifacts(ctx, s.now(), 100)
		if err != nil {
			return artifacts, caches, err
		}
		for _, a := range list {
			if err := s.st.DeleteArtifact(ctx, a.ID); err != nil {
				return artifacts, caches, err
			}
			if err := s.blobs.Delete(ctx, a.BlobKey); err != nil {
				s.log.Warn("artifact blob delete failed", "key", a.BlobKey, "err", err)
			}
			artifacts++
		}
		if len(list) < 100 {
			break
		}
	}
	ttl := time.Duration(s.set.Int(ctx, cluster.UserCacheTTLMs)) * time.Millisecond
	entries, err := s.st.ListCacheEntries(ctx, "")
	if err != nil {
		return artifacts, caches, err
	}
	for _, e := range entries {
		if s.now().Sub(e.LastUsedAt) <= ttl {
			break // least recently used first: the rest are younger
		}
		s.dropCache(ctx, e, "expired")
		caches++
	}
	return artifacts, caches, nil
}

// RunSweeper calls Sweep every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if a, c, err := s.Sweep(ctx); err != nil {
				s.log.Warn("blob sweep failed", "err", err)
			} else if a+c > 0 {
				s.log.Info("blob sweep", "artifacts", a, "caches", c)
			}
		}
	}
}
