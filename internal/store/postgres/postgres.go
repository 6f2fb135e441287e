// Package postgres is the PostgreSQL implementation of store.Store, on
// pgx/v5 with a pgxpool connection pool.
//
// The queries are store/sqlstore's, in its PostgreSQL dialect, run through
// pgx's database/sql driver over the pool. Claims use one statement,
// UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING …,
// so concurrent claimants never get the same entry and never block each
// other. Times are timestamptz written at millisecond precision and read
// back in UTC. Labels, needs and matrix values are jsonb (SQL NULL stands
// for a Go nil, "[]"/"{}" for an empty list or map); job config and
// decision traces are stored verbatim as text, delivery payloads as bytea.
// This package opens the pool and applies the store's goose migrations
// (rendered for PostgreSQL by store/sqlstore).
package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

// Store is the PostgreSQL store.Store (store/sqlstore over this package's
// pool). It is safe for concurrent use; Close closes the pool.
type Store = sqlstore.Store

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or key=value
// DSN; pool_max_conns and the other pgxpool settings apply), checks the
// connection and applies the store's migrations.
func Open(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, true, func(m *sqlstore.Migrations) error { return m.Up(ctx) })
}

// OpenCurrent connects like Open but never migrates: a schema at another
// version than this binary's migrations gives a *sqlstore.SchemaMismatchError
// (for tools that must not change the schema under a running orchestrator).
func OpenCurrent(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, false, func(m *sqlstore.Migrations) error { return m.CheckVersion(ctx) })
}

// OpenAsIs connects like Open and neither migrates nor checks the schema:
// for the migration commands, which change or report the schema
// themselves.
func OpenAsIs(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, false, func(*sqlstore.Migrations) error { return nil })
}

// warmConns is how many of a running orchestrator's store connections
// stay open while idle (Open), unless the URL sets pool_min_conns (never
// more than the pool's maximum, pool_max_conns). OpenCurrent and
// OpenAsIs, for one-off commands, keep none.
const warmConns = 16

func open(ctx context.Context, url string, warm bool, schema func(*sqlstore.Migrations) error) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (the larger of 4 and the CPUs) is fewer
		// connections than the callers that use one at once (webhook
		// accepts, the delivery pool's workers, dispatch, sweeps): they
		// queued for a connection rather than for the database.
		cfg.MaxConns = int32(max(4*runtime.NumCPU(), 16))
	}
	if !warm {
		// A command that opens the store for one task (kici-admin, a
		// migration) has no burst to wait for.
		cfg.MinConns = 0
	} else if !strings.Contains(url, "pool_min_conns") {
		// Keep up to warmConns connections open while idle: pgxpool
		// opens one only when a caller finds none free, so the first
		// requests of a burst after a quiet spell waited for new server
		// processes to start. Measured on the first 20 of a burst of
		// 2,000 webhooks at concurrency 16: the slowest accepts took
		// 230–357 ms without, 65–136 ms with.
		cfg.MinConns = min(cfg.MaxConns, warmConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	m, err := Migrations(db)
	if err == nil {
		err = schema(m)
	}
	if err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return sqlstore.New(db, sqlstore.Postgres(), pool.Close), nil
}

// Migrations returns the store's migrations, rendered for PostgreSQL, bound
// to db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	return sqlstore.NewMigrations(db, sqlstore.Postgres())
}
