package orchestrator

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
)

// restoreStart is what a node does when it starts on a restored backup
// (a copy made by `kici-admin backup`, which carries a marker): the
// database is the past, and the nodes that ran after the backup already
// ran its in-flight jobs and fired its schedules. So it ends the jobs that
// were in flight in the copy instead of re-running them, and its scheduler
// fires no instant before this start (no catch-up of the backup's past).
//
// On PostgreSQL there is no marker: the database's recorded identity
// (postgres.CheckIdentity) tells a restored copy from the database it was
// dumped from, and every node's scheduler skips the instants due before
// the copy was first started (restoreNotBefore).
type restoreStart struct {
	// what names the backup in the log (key/value pairs).
	what []any
	// clear records that the safe start is done.
	clear func(context.Context) error
}

// inFlightOnRestoreReason is the error message of a job ended by the
// restore start.
const inFlightOnRestoreReason = "ended on restore: in flight when the backup was taken"

// detectRestore reads the backup marker of the embedded database (none
// on PostgreSQL: a pg_dump restore is started per docs/operations.md).
func detectRestore(ctx context.Context, dbPath string) (*restoreStart, error) {
	info, ok, err := sqlite.RestoreMarker(ctx, dbPath)
	if err != nil {
		return nil, fmt.Errorf("read backup marker of %s: %w", dbPath, err)
	}
	if !ok {
		return nil, nil
	}
	return &restoreStart{what: []any{"backupId", info.BackupID, "backupTakenAt", info.TakenAt},
		clear: func(ctx context.Context) error { return sqlite.ClearRestoreMarker(ctx, dbPath) }}, nil
}

// dbHandle is the PostgreSQL store's database handle (sqlstore.Store).
type dbHandle interface{ DB() *sql.DB }

// detectCopiedDatabase checks the PostgreSQL database's identity
// (postgres.CheckIdentity): the safe start to apply when this database is
// a restored copy whose safe start is not done yet (nil otherwise), and
// the instant before which no schedule fires (zero when the database was
// never restored).
func detectCopiedDatabase(ctx context.Context, st store.Store, log *slog.Logger) (*restoreStart, time.Time, error) {
	h, ok := st.(dbHandle)
	if !ok {
		return nil, time.Time{}, nil
	}
	db := h.DB()
	c, err := postgres.CheckIdentity(ctx, db)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("check the database's identity (restore detection): %w", err)
	}
	if c.Copied {
		log.Warn("this database is a restored copy (or a copy or move of another database): its identity changed; applying the restore's safe start",
			"databaseOid", c.Current.DatabaseOID, "recordedOid", c.Recorded.DatabaseOID,
			"systemIdentifier", c.Current.SystemID, "recordedSystemIdentifier", c.Recorded.SystemID)
	}
	if !c.SafeStartPending {
		return nil, c.RestoredAt, nil
	}
	return &restoreStart{what: []any{"restoredAt", c.RestoredAt, "databaseOid", c.Current.DatabaseOID},
		clear: func(ctx context.Context) error { return postgres.ClearSafeStart(ctx, db) }}, c.RestoredAt, nil
}

// sqlitePath is the embedded database file of a data directory.
func sqlitePath(dataDir string) string { return filepath.Join(dataDir, "kici.db") }

// endInFlight fails every job that was queued, running or recovering in
// the copy (with inFlightOnRestoreReason; its run completes as failed),
// then drops the marker (clears the pending safe start on PostgreSQL) so
// later starts are ordinary. Run calls it
// before recovery, so none of these jobs is dispatched again.
func (s *Server) endInFlight(ctx context.Context, r *restoreStart) error {
	jobs, err := s.store.ListJobsByStatus(ctx, []status.Job{status.JobQueued, status.JobRunning, status.JobRecovering})
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, j := range jobs {
		if _, err := s.store.SetQueueStatus(ctx, j.ID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed); err != nil {
			return err
		}
		if err := s.tracker.JobFinished(ctx, j.ID, status.JobFailed, inFlightOnRestoreReason, now); err != nil {
			return err
		}
	}
	s.log.Warn("started on a restored backup: jobs in flight at backup time ended, schedules fire only instants from now on",
		append(r.what, "jobsEnded", len(jobs))...)
	return r.clear(ctx)
}
