package postgres_test

import (
	"context"
	"testing"
	"time"

	"kici.dev/kici/internal/store/postgres"
	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// serverConns counts the server's connections to the store's database.
func serverConns(t *testing.T, s *postgres.Store) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An orchestrator's store keeps 16 connections open while idle, so that a
// burst after a quiet spell does not wait for new server processes; a
// store opened for a one-off command keeps only what it uses.
func TestOpenKeepsConnectionsWarmOneOffOpensDoNot(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "16 warm connections", func() bool { return serverConns(t, s) >= 16 })
	s.Close()

	one, err := postgres.OpenCurrent(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	wait.Elapse(ctx, time.Second) // long enough for a pool to open its minimum
	if n := serverConns(t, one); n > 4 {
		t.Fatalf("a store opened for a one-off command holds %d connections; want only what it used", n)
	}
}
