package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestURLGivesFreshDatabases(t *testing.T) {
	ctx := context.Background()
	u1, u2 := pgtest.URL(t), pgtest.URL(t)
	if u1 == u2 {
		t.Fatalf("same URL twice: %s", u1)
	}
	for _, u := range []string{u1, u2} {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d tables in a fresh database", u, n)
		}
		var v int
		if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("server version %d", v)
		if _, err := conn.Exec(ctx, `CREATE TABLE t (id int)`); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
}
