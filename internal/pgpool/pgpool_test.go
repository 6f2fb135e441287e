package pgpool_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/pgpool"
	"kici.dev/kici/internal/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A pool has the size its caller asked for, whatever the URL says, and
// answers at once; a bad URL and a server that is not there are errors
// that say which, with nothing left open.
func TestOpenSizesThePoolAndChecksTheServer(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool, err := pgpool.Open(ctx, url+sep+"pool_max_conns=20", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("pool of %d connections, want 3", got)
	}
	for _, c := range []struct {
		query     string
		atMost, n int32
	}{{"pool_max_conns=2", 8, 2}, {"pool_max_conns=20", 8, 8}} {
		p, err := pgpool.OpenAtMost(ctx, url+sep+c.query, c.atMost)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config().MaxConns; got != c.n {
			t.Errorf("at most %d with %s: pool of %d, want %d", c.atMost, c.query, got, c.n)
		}
		p.Close()
	}
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %d, %v", one, err)
	}

	if _, err := pgpool.Open(ctx, "postgres://%zz", 2); err == nil || !strings.HasPrefix(err.Error(), "parse database url: ") {
		t.Errorf("bad URL: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pgpool.Open(short, "postgres://kici@"+addr+"/kici?sslmode=disable&connect_timeout=5", 2); err == nil || !strings.HasPrefix(err.Error(), "connect: ") {
		t.Errorf("no server: %v", err)
	}
}
