package orchestrator

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"time"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/logstore"
	"kici.dev/kici/internal/membership"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/store/sqlstore"
)

// OpenMigrations opens the configured database (as OpenStore) without
// migrating it and returns its migrations, for `kici-orchestrator migrate`
// (docs/upgrade.md). On SQLite it takes the data directory's lock first,
// so it refuses to run beside an orchestrator using that database; on
// PostgreSQL the migrations take the cluster-wide migration lock
// (sqlstore.MigrationLockID), and a rollback below
// sqlstore.NodeLogFormsMigration first rewrites compressed step-log
// chunks plain, reporting to progress. close releases everything.
func OpenMigrations(ctx context.Context, cfg *config.Config, progress io.Writer) (m *sqlstore.Migrations, close func(), err error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.OpenAsIs(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, nil, err
		}
		if m, err = postgres.Migrations(st.DB()); err != nil {
			st.Close()
			return nil, nil, err
		}
		m.BeforeDown(m.VersionOf(sqlstore.NodeLogFormsMigration), func(ctx context.Context, db *sql.DB) error {
			return plainStepLogs(ctx, db, st, progress)
		})
		return m, func() { st.Close() }, nil
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.OpenAsIs(ctx, cfg.DatabasePath())
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("open %s: %w", cfg.DatabasePath(), err)
	}
	if m, err = sqlite.Migrations(st.DB()); err != nil {
		st.Close()
		lock.Close()
		return nil, nil, err
	}
	return m, func() { st.Close(); lock.Close() }, nil
}

// plainStepLogs rewrites the compressed step-log chunks plain
// (logstore.PlainChunks), saying so on progress before, every few seconds
// during and after the work.
func plainStepLogs(ctx context.Context, db *sql.DB, registry store.NodeStore, progress io.Writer) error {
	// A node still running writes compressed chunks until the column the
	// Down migration drops is gone: the procedure stops them all first.
	// A node stopped a moment ago still has a recent heartbeat, so this
	// is a warning to check, not a refusal.
	nodes, err := registry.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("read the node registry: %w", err)
	}
	var live []string
	now := time.Now()
	for _, n := range nodes {
		if membership.Alive(n, now) {
			live = append(live, n.ID)
		}
	}
	if len(live) > 0 {
		fmt.Fprintf(progress, "warning: nodes heartbeated in the last %s: %s. If any still runs, stop it (docs/upgrade.md): "+
			"the step-log chunks a running node writes compressed from now on are not rewritten and releases before this schema cannot read them\n",
			membership.NodeLiveFor, strings.Join(live, ", "))
	}
	fmt.Fprintln(progress, "rewriting compressed step-log chunks plain, which releases before this schema read…")
	last := time.Now()
	n, err := logstore.PlainChunks(ctx, db, func(done int) {
		if time.Since(last) >= 5*time.Second {
			fmt.Fprintf(progress, "  %d chunks rewritten so far\n", done)
			last = time.Now()
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "%d compressed step-log chunks rewritten plain\n", n)
	return nil
}
