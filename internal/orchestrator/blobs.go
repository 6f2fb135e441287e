package orchestrator

import (
	"log/slog"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/jobblobs"
	"kici.dev/kici/internal/store"
)

// BlobSweepInterval is how often expired artifacts and caches are deleted.
const BlobSweepInterval = time.Minute

// setupBlobs returns the cache and artifact service over the configured
// blob store bs (KICI_STORAGE_TYPE, blobstore.FromEnv).
func setupBlobs(bs blobstore.Store, st store.Store, settings *cluster.Reader, logger *slog.Logger) *jobblobs.Service {
	logger.Info("blob store", "kind", bs.Kind())
	return jobblobs.New(st, bs, settings, logger)
}
