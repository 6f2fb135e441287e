package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/orchestrator"
)

const migrateUsage = `Usage: kici-orchestrator migrate status | up | down-to VERSION

Works on the database this environment configures (KICI_DATABASE_URL, else
the SQLite database in KICI_DATA_DIR), as the server would, and exits:
  status         print the schema version and this binary's (exit 0 when equal, 1 when not)
  up             apply this binary's pending migrations (the server also does at start)
  down-to V      roll the schema back to version V with this binary's Down migrations,
                 before starting an older release (docs/upgrade.md)
On PostgreSQL the migrations hold the cluster's migration lock; on SQLite
stop the orchestrator first (the data directory is locked while it runs).
`

// migrate runs `kici-orchestrator migrate …` and returns the exit code: 0
// done, 1 failed (or, for status, schema not at this binary's version),
// 2 bad usage.
func migrate(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "status" && args[0] != "up" && args[0] != "down-to") ||
		(args[0] == "down-to") != (len(args) == 2) || len(args) > 2 {
		fmt.Fprint(stderr, migrateUsage)
		return 2
	}
	var target int64
	if args[0] == "down-to" {
		v, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || v < 0 {
			fmt.Fprintf(stderr, "kici-orchestrator migrate down-to: %q is not a schema version (a whole number ≥ 0; see `migrate status`)\n", args[1])
			return 2
		}
		target = v
	}
	cfg, err := config.Load(os.Environ())
	if err != nil {
		fmt.Fprintln(stderr, "kici-orchestrator:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	m, closeDB, err := orchestrator.OpenMigrations(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "kici-orchestrator migrate:", err)
		return 1
	}
	defer closeDB()
	switch args[0] {
	case "up":
		err = m.Up(ctx)
	case "down-to":
		if target > m.Expected() {
			err = fmt.Errorf("version %d is newer than this binary's %d: roll back with the binary that carries it", target, m.Expected())
		} else {
			err = m.DownTo(ctx, target)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kici-orchestrator migrate:", err)
		return 1
	}
	have, err := m.Current(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "kici-orchestrator migrate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "schema version %d; this binary's %d\n", have, m.Expected())
	if args[0] == "status" && have != m.Expected() {
		return 1
	}
	return 0
}
