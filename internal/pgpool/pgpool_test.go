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
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %d, %v", one, err)
	}

	if _, err := pgpool.Open(ctx, "postgres://%zz", 2); err == nil || !strings.Contains(err.Error(), "parse database url") {
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
	if _, err := pgpool.Open(short, "postgres://kici@"+addr+"/kici?sslmode=disable&connect_timeout=5", 2); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Errorf("no server: %v", err)
	}
}
