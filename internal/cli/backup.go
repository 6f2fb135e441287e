package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/config"
)

// BackupRequest is a `kici-admin backup` command line: the data directory
// of the embedded database, the copy to write and whether to copy the
// master key beside it.
type BackupRequest struct {
	DataDir, Out string
	WithKey      bool
}

// pgBackupProcedure is the answer of `kici-admin backup` on PostgreSQL:
// the database server does the consistent copy.
const pgBackupProcedure = `this orchestrator stores in PostgreSQL (KICI_DATABASE_URL): back it up with pg_dump, which is consistent while the nodes run:
  pg_dump --format=custom --file kici.dump "$KICI_DATABASE_URL"
and keep beside it the master key (KICI_SECRET_KEY / KICI_SECRET_KEY_FILE) and the blob store (S3 bucket or <data dir>/blobs).
Restore with every node stopped into a NEW database (createdb kici_restored; pg_restore --no-owner --dbname …/kici_restored kici.dump), point KICI_DATABASE_URL at it and start one node first: it sees a restored copy and ends the jobs in flight in the dump, firing no schedule instant due before it (docs/operations.md, "Backup and restore")`

// backupCommand is `kici-admin backup --out FILE [--with-key]`. The copy
// needs the SQLite driver, which kici-admin does not link: like migrate,
// the command line is handed to `kici-orchestrator admin` (IO.Backup).
func (a *app) backupCommand() *cobra.Command {
	var req BackupRequest
	cmd := &cobra.Command{
		Use:   "backup --out FILE [--with-key]",
		Short: "Copy the embedded database online, consistently (restore: docs/operations.md)",
		Long: `Write an online, consistent copy of the orchestrator's SQLite database
(<data dir>/kici.db, SQLite VACUUM INTO: safe while the orchestrator runs) to
FILE, a new file (0600). Keep beside it the master key (<data dir>/secret.key
or KICI_SECRET_KEY/_FILE: every secret in the copy is sealed with it; --with-key
copies the key file to FILE.secret.key, 0600) and the blob store
(<data dir>/blobs, or the S3 bucket).

Restore: stop the orchestrator, put FILE as <data dir>/kici.db (and the key as
<data dir>/secret.key), start. The first start on a copy ends the jobs that
were in flight when the copy was taken (failed, "ended on restore: in flight
when the backup was taken") instead of running them again, and fires no
schedule instant that fell due before the start.

On PostgreSQL (KICI_DATABASE_URL) it refuses and prints the pg_dump procedure.
Runs in kici-orchestrator (installed beside kici-admin).`,
		Example: `  kici-admin backup --out /backup/kici-$(date +%F).db --with-key
  kici-admin --data-dir /var/lib/kici backup --out /backup/kici.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Out == "" {
				return errors.New("--out FILE is required: the new file to write the copy to")
			}
			if strings.TrimSpace(a.io.Getenv("KICI_DATABASE_URL")) != "" {
				return errors.New(pgBackupProcedure)
			}
			if a.io.Backup == nil {
				if a.io.DelegateDirect != nil {
					return a.io.DelegateDirect()
				}
				return errors.New("this kici-admin cannot reach the database: run `kici-orchestrator admin backup` beside the orchestrator")
			}
			req.DataDir = a.dataDir
			if req.DataDir == "" {
				if req.DataDir = strings.TrimSpace(a.io.Getenv("KICI_DATA_DIR")); req.DataDir == "" {
					req.DataDir = config.DefaultDataDir()
				}
			}
			return a.io.Backup(cmd.Context(), req, a.io.Stdout)
		},
	}
	cmd.Flags().StringVarP(&req.Out, "out", "o", "", "file to write the copy to (must not exist)")
	cmd.Flags().BoolVar(&req.WithKey, "with-key", false, "also copy the master key file to FILE.secret.key (0600)")
	return cmd
}

// BackupSummary is what `kici-admin backup` prints once the copy is
// written (kici-orchestrator's IO.Backup): the files and what else a
// restore needs.
func BackupSummary(dataDir, file, id, keyFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "backup %s written to %s\n", id, file)
	if keyFile != "" {
		fmt.Fprintf(&b, "master key copied to %s (0600)\n", keyFile)
	} else {
		fmt.Fprintf(&b, "keep beside it the master key (%s/secret.key, or KICI_SECRET_KEY/_FILE): the copy's secrets are sealed with it\n", dataDir)
	}
	fmt.Fprintf(&b, "keep beside it the blob store (%s/blobs, or the S3 bucket) and %s/logs (step logs)\n", dataDir, dataDir)
	return b.String()
}
