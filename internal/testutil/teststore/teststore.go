// Package teststore opens the stores tests run against: a fresh SQLite
// store in the test's temporary directory, and, for tests that hold for
// both backends, a fresh PostgreSQL database too when the environment
// names a server (KICI_TEST_DATABASE_URL, see internal/testutil/pgtest).
package teststore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/sqlite"
	"kici.dev/kici/internal/testutil/pgtest"
)

// SQLite opens a fresh, migrated SQLite store at kici.db in a new
// temporary directory and closes it when the test ends. It fails the test
// when the store cannot be opened.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatalf("open sqlite store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Each runs fn as a subtest on a fresh store of each backend: "sqlite"
// always, "postgres" (a new database on that server, dropped at the end)
// only when KICI_TEST_DATABASE_URL is set, so a machine without
// PostgreSQL still runs the SQLite half.
func Each(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	if os.Getenv(pgtest.EnvURL) == "" {
		return
	}
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatalf("open postgres store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}
