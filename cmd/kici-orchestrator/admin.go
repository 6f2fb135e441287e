package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"kici.dev/kici/internal/backup"
	"kici.dev/kici/internal/cli"
	"kici.dev/kici/internal/cli/direct"
	"kici.dev/kici/internal/orchestrator"
)

// admin runs `kici-orchestrator admin <args>`: the kici-admin command tree
// with direct-database mode compiled in (package cli/direct serves the admin
// routes in-process over the database named by --database-url or
// KICI_DATABASE_URL). kici-admin itself is a pure HTTP client and execs this
// entry point for direct-mode command lines. It returns the exit code.
func admin(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Version = orchestrator.Version
	return cli.Run(ctx, args, cli.IO{OpenDatabase: direct.Open, Migrate: migrate, Backup: writeBackup})
}

// writeBackup serves `kici-admin backup` (backup.Backup) and prints what
// it wrote and what else to keep.
func writeBackup(ctx context.Context, req cli.BackupRequest, stdout io.Writer) error {
	res, err := backup.Backup(ctx, req.DataDir, req.Out, req.WithKey, os.Getenv)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, cli.BackupSummary(req.DataDir, res.File, res.BackupID, res.KeyFile))
	return err
}
