package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/blobstore"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/membership"
	"kici.dev/kici/internal/store"
)

// stepLogs is the step-log store a node opened (openStepLogs).
type stepLogs struct {
	// store is what the node reads and writes step logs through.
	store logstore.Store
	// archive is store when it archives finished logs to the blob store
	// (KICI_LOG_ARCHIVE), for its Run; else nil.
	archive *logstore.Archived
	// compression turns chunk compression on and off as the cluster's
	// nodes allow (KICI_STEP_LOG_COMPRESS); nil unless the logs live in
	// PostgreSQL with compression allowed.
	compression *logCompression
	// close releases the store at shutdown.
	close func()
}

// openStepLogs opens the step-log store KICI_STEP_LOG_STORE names: in the
// PostgreSQL database (shared by every node, the default with
// KICI_DATABASE_URL) or files under <data dir>/logs, with the per-step
// size cap KICI_STEP_LOG_MAX_BYTES. With KICI_LOG_ARCHIVE (the default)
// finished logs move to the blob store blobs and the store returned reads
// both. In PostgreSQL chunks are written plain until the node's first
// heartbeat finds that every recent node reads compressed ones
// (logCompression). The store's migrations have created the tables by now.
func openStepLogs(ctx context.Context, cfg *config.Config, blobs blobstore.Store, logger *slog.Logger) (stepLogs, error) {
	sl := stepLogs{close: func() {}}
	if cfg.StepLogStore == config.StepLogsPostgres {
		pg, err := logstore.OpenPG(ctx, cfg.DatabaseURL, logger)
		if err != nil {
			return stepLogs{}, err
		}
		pg.SetStepMaxBytes(cfg.StepLogMaxBytes)
		if cfg.StepLogCompress {
			sl.compression = &logCompression{pg: pg, log: logger}
		}
		sl.store, sl.close = pg, pg.Close
	} else {
		fs := logstore.NewFS(filepath.Join(cfg.DataDir, "logs"))
		fs.SetStepMaxBytes(cfg.StepLogMaxBytes)
		sl.store = fs
	}
	if !cfg.LogArchive || blobs == nil {
		return sl, nil
	}
	archive, err := logstore.NewArchived(sl.store, blobs, logger)
	if err != nil {
		sl.close()
		return stepLogs{}, err
	}
	logger.Info("finished step logs are archived to the blob store", "kind", blobs.Kind(), "after", cfg.LogArchiveAfter)
	sl.store, sl.archive = archive, archive
	return sl, nil
}

// logCompression switches the PostgreSQL log store's chunk compression
// (logstore.PG.SetCompress) on while every node of the registry reads
// compressed chunks and off while one that does not heartbeated within
// membership.PlainOnlyHoldsFor, as each heartbeat finds
// (membership.NodeConfig.CompressedLogs), and logs the first finding and
// each change. During a rolling upgrade from a release that reads only
// plain chunks the new nodes write plain ones until the last old node is
// gone (restarted as a new one, removed, or silent for the hold time).
type logCompression struct {
	pg  *logstore.PG
	log *slog.Logger

	mu        sync.Mutex
	on        bool
	known     bool     // set once the first heartbeat told
	plainOnly []string // the nodes that held it off at the last finding
}

// set applies one heartbeat's finding, and logs it when it is the first
// or differs from the last (on or off, or the nodes holding it off).
func (c *logCompression) set(everyNodeReads bool, plainOnly []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pg.SetCompress(everyNodeReads)
	if c.known && everyNodeReads == c.on && slices.Equal(plainOnly, c.plainOnly) {
		return
	}
	switch {
	case everyNodeReads:
		c.log.Info("step-log chunks are written compressed: every node that heartbeated within the hold time reads them",
			"hold", membership.PlainOnlyHoldsFor)
	case len(plainOnly) > 0:
		c.log.Warn("step-log chunks are written plain: nodes of an older release that read only those heartbeated within the hold time",
			"nodes", plainOnly, "hold", membership.PlainOnlyHoldsFor)
	default:
		c.log.Warn("step-log chunks are written plain: the node registry could not be read")
	}
	c.on, c.known, c.plainOnly = everyNodeReads, true, plainOnly
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

// setter is set as a heartbeat callback, or nil when c is nil (nothing to
// switch).
func (c *logCompression) setter() func(bool, []string) {
	if c == nil {
		return nil
	}
	return c.set
}
