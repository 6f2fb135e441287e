package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/store/storetest"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sub", "dir", "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
}

func TestOpenCreatesWALDatabaseAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a", "b", "kici.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk, busy int
	if err := s.DB().QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if fk != 1 || busy != int(sqlite.BusyTimeout.Milliseconds()) {
		t.Errorf("foreign_keys=%d busy_timeout=%d", fk, busy)
	}
	if err := s.CreateSource(ctx, &store.Source{ID: "s1", OrgID: "o", Name: "n", Provider: "local"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening applies no migration twice and keeps the data.
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetSource(ctx, "s1"); err != nil {
		t.Fatalf("source lost across reopen: %v", err)
	}
}

func BenchmarkClaimNext(b *testing.B) { storetest.BenchmarkClaimNext(b, benchStore(b)) }

func BenchmarkDispatchRows(b *testing.B) { storetest.BenchmarkDispatchRows(b, benchStore(b)) }

// BenchmarkStartJob times a job's start on SQLite, in one call and in the
// two it replaced (storetest.BenchmarkStartJob).
func BenchmarkStartJob(b *testing.B) { storetest.BenchmarkStartJob(b, benchStore(b)) }

// benchStore opens a store on a fresh database file, closed when the
// benchmark ends.
func benchStore(b *testing.B) store.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "kici.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// The database and its WAL files hold secrets: only the owner may read them.
func TestDatabaseFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kici.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateSource(context.Background(), &store.Source{ID: "s1", OrgID: "o", Name: "n", Provider: "generic", RoutingKey: "generic:o:s1", VerificationMethod: "none", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

// Every migration runs down to 0 and up again.
func TestMigrationsDownAndUp(t *testing.T) {
	s := newStore(t).(*sqlite.Store)
	m, err := sqlite.Migrations(s.DB())
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunMigrations(t, s, m)
}

// A fresh database migrated up has exactly the schema recorded in
// testdata/schema.golden.
func TestSchemaMatchesGolden(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckSchemaGolden(t, s.DB(), false)
}
