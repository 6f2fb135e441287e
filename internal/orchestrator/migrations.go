package orchestrator

import (
	"context"
	"fmt"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/store/sqlstore"
)

// OpenMigrations opens the configured database (as OpenStore) without
// migrating it and returns its migrations, for `kici-orchestrator migrate`
// (docs/upgrade.md). On SQLite it takes the data directory's lock first,
// so it refuses to run beside an orchestrator using that database; on
// PostgreSQL the migrations take the cluster-wide migration lock
// (sqlstore.MigrationLockID). close releases everything.
func OpenMigrations(ctx context.Context, cfg *config.Config) (m *sqlstore.Migrations, close func(), err error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.OpenAsIs(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, nil, err
		}
		if m, err = postgres.Migrations(st.DB()); err != nil {
			st.Close()
			return nil, nil, err
		}
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
