package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlstore"
	"kici.dev/kici/internal/store/storetest"
	"kici.dev/kici/internal/testutil/pgtest"
)

// Three nodes starting at once on an empty database each open their own
// pool and migrate: the migration lock lets one migrate while the others
// wait, so all three start and the schema is the one a lone node makes.
// Without the lock this failed most rounds with duplicate catalog rows
// (pg_type_typname_nsp_index) or "relation already exists".
func TestConcurrentOpenOnEmptyDatabaseMigratesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for round := 0; round < 10; round++ {
		u := pgtest.URL(t)
		const nodes = 3
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			errs  = make([]error, nodes)
			opens = make([]*postgres.Store, nodes)
		)
		for i := 0; i < nodes; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				opens[i], errs[i] = postgres.Open(ctx, u)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: node %d of %d failed to start: %v", round+1, i+1, nodes, err)
			}
		}
		storetest.CheckSchemaGolden(t, opens[0].DB(), true)
		m, err := postgres.Migrations(opens[0].DB())
		if err != nil {
			t.Fatal(err)
		}
		// Each version recorded once: one node applied each migration.
		var rows, distinct int
		if err := opens[0].DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != distinct || int64(distinct) != m.Expected() {
			t.Fatalf("round %d: goose_db_version has %d rows for %d versions; want each of the %d versions once", round+1, rows, distinct, m.Expected())
		}
		for _, s := range opens {
			s.Close()
		}
	}
}

// A binary meeting a schema newer than its newest migration refuses to
// start, says which versions and what to do, and leaves the database as
// it was.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := postgres.Migrations(s.DB())
	if err != nil {
		t.Fatal(err)
	}
	want := m.Expected()
	// What a newer release leaves behind: a version this binary lacks.
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, want+1); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, u)
	var newer *sqlstore.SchemaNewerError
	if !errors.As(err, &newer) || newer.Have != want+1 || newer.Want != want {
		t.Fatalf("Open on a newer schema: got %v, want a SchemaNewerError %d > %d", err, want+1, want)
	}
	for _, part := range []string{"newer than this binary", "migrate down-to", "docs/upgrade.md"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	if have, err := m.Current(ctx); err != nil || have != want+1 {
		t.Fatalf("schema version after the refused start: %d, %v; want %d unchanged", have, err, want+1)
	}
}
