package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

// RunMigrations checks a dialect's migrations on a database s was opened on
// (so already migrated up): the schema is at the newest version, every
// Down section runs (down to 0 leaves only goose's version table), and
// migrating up again gives back the same tables and a working store. m must
// be bound to s's database.
func RunMigrations(t *testing.T, s store.Store, m *sqlstore.Migrations) {
	ctx := context.Background()
	want := m.Expected()
	if want == 0 {
		t.Fatal("no migrations embedded")
	}
	checkVersion := func(when string, v int64) {
		t.Helper()
		got, err := m.Current(ctx)
		must(t, err)
		if got != v {
			t.Fatalf("%s: schema version %d, want %d", when, got, v)
		}
	}
	checkVersion("after Open", want)
	must(t, m.CheckVersion(ctx))
	tables, err := m.Tables(ctx)
	must(t, err)
	if !slices.Contains(tables, "execution_runs") || !slices.Contains(tables, "goose_db_version") {
		t.Fatalf("tables after Open: %v", tables)
	}

	must(t, m.DownTo(ctx, 0))
	checkVersion("after down to 0", 0)
	left, err := m.Tables(ctx)
	must(t, err)
	same(t, "tables left after down to 0", []string{"goose_db_version"}, left)
	var mismatch *sqlstore.SchemaMismatchError
	if err := m.CheckVersion(ctx); !errors.As(err, &mismatch) || mismatch.Have != 0 || mismatch.Want != want {
		t.Fatalf("CheckVersion at 0: %v", err)
	}

	must(t, m.Up(ctx))
	checkVersion("after up again", want)
	again, err := m.Tables(ctx)
	must(t, err)
	same(t, "tables after up again", tables, again)
	src := &store.Source{ID: "src-m", OrgID: "org", Name: "after-migrations", Provider: provider.Generic, CreatedAt: at(0)}
	must(t, s.CreateSource(ctx, src))
	got, err := s.GetSource(ctx, src.ID)
	must(t, err)
	same(t, "source after down and up", src, got)
}
