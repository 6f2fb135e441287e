package orchestrator

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"kici.dev/kici/internal/execution/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

// restoreStart is what a node does when it starts on a restored backup
// (a copy made by `kici-admin backup`, which carries a marker): the
// database is the past, and the nodes that ran after the backup already
// ran its in-flight jobs and fired its schedules. So it ends the jobs that
// were in flight in the copy instead of re-running them, and its scheduler
// fires no instant before this start (no catch-up of the backup's past).
type restoreStart struct {
	info   sqlite.BackupInfo
	dbPath string
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
	return &restoreStart{info: info, dbPath: dbPath}, nil
}

// sqlitePath is the embedded database file of a data directory.
func sqlitePath(dataDir string) string { return filepath.Join(dataDir, "kici.db") }

// endInFlight fails every job that was queued, running or recovering in
// the copy (with inFlightOnRestoreReason; its run completes as failed),
// then drops the marker so later starts are ordinary. Run calls it
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
		"backupId", r.info.BackupID, "backupTakenAt", r.info.TakenAt, "jobsEnded", len(jobs))
	return sqlite.ClearRestoreMarker(ctx, r.dbPath)
}
