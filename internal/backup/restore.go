package backup

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
)

// RestoreStart is what a node does when it starts on a restored backup
// (a copy made by `kici-admin backup`, which carries a marker): the
// database is the past, and the nodes that ran after the backup already
// ran its in-flight jobs and fired its schedules. So it ends the jobs that
// were in flight in the copy instead of re-running them (EndInFlight), and
// its scheduler fires no instant before this start (no catch-up of the
// backup's past).
//
// On PostgreSQL there is no marker: the database's recorded identity
// (postgres.CheckIdentity) tells a restored copy from the database it was
// dumped from (DetectCopiedDatabase).
type RestoreStart struct {
	// what names the backup in the log (key/value pairs).
	what []any
	// clear records that the safe start is done.
	clear func(context.Context) error
}

// InFlightReason is the error message of a job ended by the restore
// start.
const InFlightReason = "ended on restore: in flight when the backup was taken"

// DetectMarker reads the backup marker of the embedded database at dbPath:
// the restore start to apply, or nil when the database is not a restored
// backup (or its safe start is done).
func DetectMarker(ctx context.Context, dbPath string) (*RestoreStart, error) {
	info, ok, err := sqlite.RestoreMarker(ctx, dbPath)
	if err != nil {
		return nil, fmt.Errorf("read backup marker of %s: %w", dbPath, err)
	}
	if !ok {
		return nil, nil
	}
	return &RestoreStart{what: []any{"backupId", info.BackupID, "backupTakenAt", info.TakenAt},
		clear: func(ctx context.Context) error { return sqlite.ClearRestoreMarker(ctx, dbPath) }}, nil
}

// dbHandle is the PostgreSQL store's database handle (sqlstore.Store).
type dbHandle interface{ DB() *sql.DB }

// DetectCopiedDatabase checks the PostgreSQL database's identity
// (postgres.CheckIdentity): the restore start to apply when this database
// is a restored copy whose safe start is not done yet (nil otherwise), and
// the instant before which no schedule fires (zero when the database was
// never restored). A store without a database handle (SQLite, test
// stores) is never a copy.
func DetectCopiedDatabase(ctx context.Context, st store.Store, log *slog.Logger) (*RestoreStart, time.Time, error) {
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
	return &RestoreStart{what: []any{"restoredAt", c.RestoredAt, "databaseOid", c.Current.DatabaseOID},
		clear: func(ctx context.Context) error { return postgres.ClearSafeStart(ctx, db) }}, c.RestoredAt, nil
}

// JobFinisher records a job's end and completes its run when it was the
// last (runs.Tracker is one).
type JobFinisher interface {
	JobFinished(ctx context.Context, jobID string, st status.Job, errMsg string, at time.Time) error
}

// EndInFlight fails every job that was queued, running or recovering in
// the copy (with InFlightReason; its run completes as failed), then drops
// the marker (clears the pending safe start on PostgreSQL) so later starts
// are ordinary. A node calls it before recovery, so none of these jobs is
// dispatched again.
func (r *RestoreStart) EndInFlight(ctx context.Context, st store.Store, jobs JobFinisher, log *slog.Logger) error {
	inFlight, err := st.ListJobsByStatus(ctx, []status.Job{status.JobQueued, status.JobRunning, status.JobRecovering})
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, j := range inFlight {
		if _, err := st.SetQueueStatus(ctx, j.ID, []string{store.QueuePending, store.QueueDispatched}, store.QueueFailed); err != nil {
			return err
		}
		if err := jobs.JobFinished(ctx, j.ID, status.JobFailed, InFlightReason, now); err != nil {
			return err
		}
	}
	log.Warn("started on a restored backup: jobs in flight at backup time ended, schedules fire only instants from now on",
		append(r.what, "jobsEnded", len(inFlight))...)
	return r.clear(ctx)
}
