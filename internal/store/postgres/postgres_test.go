package postgres_test

import (
	"context"
	"net/url"
	"testing"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/store/storetest"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dbURL returns a fresh database URL with a pool large enough that the
// concurrent-claim tests really run claims in parallel.
func dbURL(t testing.TB) string {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "16")
	u.RawQuery = q.Encode()
	return u.String()
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dbURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
}

func TestOpenTwiceMigratesOnce(t *testing.T) {
	ctx := context.Background()
	u := dbURL(t)
	for i := 0; i < 2; i++ {
		s, err := postgres.Open(ctx, u)
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if i == 0 {
			if err := s.CreateSource(ctx, &store.Source{ID: "s1", OrgID: "o", Name: "n", Provider: "local"}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.GetSource(ctx, "s1"); err != nil {
			t.Fatalf("source lost across reopen: %v", err)
		}
		s.Close()
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := postgres.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
}

func BenchmarkClaimNext(b *testing.B) {
	s, err := postgres.Open(context.Background(), dbURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkClaimNext(b, s)
}
