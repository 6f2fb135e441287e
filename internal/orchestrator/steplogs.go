package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/store"
)

// openStepLogs opens the step-log store KICI_STEP_LOG_STORE names: in the
// PostgreSQL database (shared by every node, the default with
// KICI_DATABASE_URL) or files under <data dir>/logs, with the per-step
// size cap KICI_STEP_LOG_MAX_BYTES. With KICI_LOG_ARCHIVE (the default)
// finished logs move to the blob store blobs and the store returned reads
// both (archive is then non-nil, for its Run). The store's
// migrations have created the tables by now. close releases it at
// shutdown.
func openStepLogs(ctx context.Context, cfg *config.Config, blobs blobstore.Store, logger *slog.Logger) (logs logstore.Store, archive *logstore.Archived, close func(), err error) {
	var live logstore.Store
	close = func() {}
	if cfg.StepLogStore == config.StepLogsPostgres {
		pg, err := logstore.OpenPG(ctx, cfg.DatabaseURL, logger)
		if err != nil {
			return nil, nil, nil, err
		}
		pg.SetStepMaxBytes(cfg.StepLogMaxBytes)
		pg.SetCompress(cfg.StepLogCompress)
		live, close = pg, pg.Close
	} else {
		fs := logstore.NewFS(filepath.Join(cfg.DataDir, "logs"))
		fs.SetStepMaxBytes(cfg.StepLogMaxBytes)
		live = fs
	}
	if !cfg.LogArchive || blobs == nil {
		return live, nil, close, nil
	}
	archive, err = logstore.NewArchived(live, blobs, logger)
	if err != nil {
		close()
		return nil, nil, nil, err
	}
	logger.Info("finished step logs are archived to the blob store", "kind", blobs.Kind(), "after", cfg.LogArchiveAfter)
	return archive, archive, close, nil
}

// logArchive is the archiving step-log store whose Run the node runs.
type logArchive = logstore.Archived

// logArchiveInterval is how often the node looks for finished logs to
// archive (logstore.Archived.Run).
const logArchiveInterval = 15 * time.Second

// jobFinished reports, for the log archive, whether a step's job is
// finished: terminal, or deleted with its run (nothing will write again).
func jobFinished(st store.Store) func(ctx context.Context, runID, jobID string) (bool, error) {
	return func(ctx context.Context, _, jobID string) (bool, error) {
		job, err := st.GetJob(ctx, jobID)
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return job.Status.IsTerminal(), nil
	}
}
