package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlstore"
)

// Work registered with BeforeDown runs once when down-to rolls back the
// migration it belongs to, before that migration's Down (its column is
// still there), and not when down-to stops above it or starts below it.
func TestDownToRunsTheWorkOfTheMigrationsItRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pool.get(t).s
	m, err := postgres.Migrations(s.DB())
	if err != nil {
		t.Fatal(err)
	}
	// The database goes back to the shared pool: at this binary's version
	// whatever happens below.
	t.Cleanup(func() {
		if err := m.Up(context.Background()); err != nil {
			t.Errorf("migrating the pooled database up again: %v", err)
		}
	})
	v := m.VersionOf(sqlstore.NodeLogFormsMigration)
	if v == 0 || v > m.Expected() {
		t.Fatalf("version of %s = %d (newest %d)", sqlstore.NodeLogFormsMigration, v, m.Expected())
	}
	var ran []int64
	m.BeforeDown(v, func(ctx context.Context, db *sql.DB) error {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_name = 'cluster_nodes' AND column_name = 'compressed_logs_since'`).Scan(&n); err != nil {
			return err
		}
		ran = append(ran, int64(n))
		return nil
	})
	if err := m.DownTo(ctx, m.Expected()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("down-to the current version ran the work %d times", len(ran))
	}
	if err := m.DownTo(ctx, v-1); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != 1 {
		t.Fatalf("down-to below the migration: work ran %v (column present each time), want once, before the Down", ran)
	}
	if err := m.DownTo(ctx, v-2); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 {
		t.Fatalf("down-to from below the migration ran its work again: %v", ran)
	}
}
