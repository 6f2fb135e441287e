// Package pgpool opens the small PostgreSQL connection pools that sit
// beside the store's own: the log store, the cluster bus, the agent
// session registry and the source cache each hold a few connections of
// their own, so that a LISTEN or a long append never waits behind the
// store's queries, nor the store's queries behind them.
package pgpool

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects a pool of exactly conns connections to the database at url
// (a PostgreSQL URL or key/value string, as pgxpool.ParseConfig reads it)
// and checks that the server answers. conns replaces the URL's
// pool_max_conns, which sizes the store's pool: a caller that needs a
// number of connections to work at all (one that listens and one that
// writes, say) would wait on itself with fewer. Errors: an unparsable url,
// or a server that cannot be reached or refuses the connection; both
// wrapped ("parse database url: …", "connect: …"), with nothing left open.
func Open(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, func(cfg *pgxpool.Config) { cfg.MaxConns = conns })
}

// OpenAtMost is Open for a caller that works with any number of
// connections: the pool keeps the URL's pool_max_conns (or pgxpool's
// default, the larger of 4 and the number of CPUs) when that is below
// conns, so an operator who sized the pools to the server's
// max_connections is not given more.
func OpenAtMost(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, func(cfg *pgxpool.Config) { cfg.MaxConns = min(cfg.MaxConns, conns) })
}

func open(ctx context.Context, url string, size func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	size(cfg)
	// pool_min_conns in the URL is for the store's pool: these small
	// pools open connections as their callers need them.
	cfg.MinConns, cfg.MinIdleConns = 0, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}
