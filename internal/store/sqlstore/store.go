// Package sqlstore is the one implementation of store.Store, over
// database/sql, for both SQLite (modernc.org/sqlite) and PostgreSQL (pgx's
// database/sql driver). Each query is written once; a Dialect rebinds its
// placeholders and casts, converts times (INTEGER Unix milliseconds on
// SQLite, timestamptz on PostgreSQL, both read back in UTC at millisecond
// precision) and supplies the few statements that truly differ. JSON values
// (labels, needs, matrix values) are TEXT on SQLite and jsonb on PostgreSQL;
// SQL NULL stands for a Go nil and "[]"/"{}" for an empty list or map.
//
// The packages store/sqlite and store/postgres open the database, apply
// their dialect's goose migrations and hand the handle to New.
//
// # Migrations
//
// Each migration is written once, as a template migrations/<content>.sql,
// and rendered per dialect with text/template into the in-memory files
// goose reads (RenderMigrations, NNNNN_<content>.sql). A template writes
// portable SQL and spells the few types and literals that differ with
// {{.Time}} (INTEGER Unix milliseconds / TIMESTAMPTZ), {{.Int}} (INTEGER /
// BIGINT), {{.Bool}} with {{.True}} and {{.False}} (INTEGER 1 and 0 /
// BOOLEAN), {{.JSON}} (TEXT / JSONB), {{.Bytes}} (BLOB / BYTEA) and
// {{.Serial}} (auto-numbered primary key); a statement that truly differs
// is chosen with {{if .Postgres}}…{{else}}…{{end}}.
//
// Version numbers are per dialect (migrationVersions in
// migrations_render.go). goose records only the number of each applied
// migration, so in each dialect a number must keep meaning the change it
// meant when it was deployed, and the two sequences diverged at 16: SQLite's
// 16 is the dispatch_queue seq index, PostgreSQL's 16 and 17 are the shared
// step logs and agent sessions (SQLite databases keep neither), and the
// delivery claim lease is SQLite's 17 and PostgreSQL's 18. One shared
// sequence would renumber deployed versions, so a template is named by its
// content and each dialect lists the version it has there; a new migration
// is one template plus one entry with the next number of each dialect.
package sqlstore

import (
	"context"
	"database/sql"

	"kici.dev/kici/internal/groupcommit"
	"kici.dev/kici/internal/store"
)

// Store is the SQL store.Store. It is safe for concurrent use.
type Store struct {
	conn
	db      *sql.DB
	release func()
	accepts *groupcommit.Queue[acceptCall] // AcceptDelivery's groups on SQLite (acceptbatch.go)
}

// New returns a Store over db (already migrated) speaking dialect d. Close
// closes db, then calls release (when not nil) to free what db was opened
// on, e.g. a connection pool.
func New(db *sql.DB, d *Dialect, release func()) *Store {
	s := &Store{conn: conn{q: db, d: d}, db: db, release: release}
	s.accepts = s.newAcceptQueue()
	return s
}

// DB returns the underlying database handle (for diagnostics and tests).
func (s *Store) DB() *sql.DB { return s.db }

// Close releases the database handle.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.release != nil {
		s.release()
	}
	return err
}

// queryer is what *sql.DB and *sql.Tx share.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// conn runs portable queries (see Dialect) on the database or inside a
// transaction.
type conn struct {
	q queryer
	d *Dialect
}

func (c conn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.q.ExecContext(ctx, c.d.rebind(q), args...)
}

func (c conn) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.q.QueryContext(ctx, c.d.rebind(q), args...)
}

func (c conn) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return c.q.QueryRowContext(ctx, c.d.rebind(q), args...)
}

// tx runs fn in a transaction, committed when fn returns nil and rolled
// back otherwise. On SQLite transactions begin IMMEDIATE (see store/sqlite),
// so a transaction that reads before it writes already holds the write
// lock.
func (s *Store) tx(ctx context.Context, fn func(c conn) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(conn{q: tx, d: s.d}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func collect[T any](rows *sql.Rows, err error, scan func(scanner) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanEach(rows, scan)
}

// rowSource is what *sql.Rows and pgx.Rows share for reading rows.
type rowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanEach reads every row of rows with scan.
func scanEach[T any](rows rowSource, scan func(scanner) (*T, error)) ([]*T, error) {
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// affected maps an exec result to ErrNotFound when no row changed.
func affected(res sql.Result, err error) error {
	if err != nil {
		return mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// changed reports whether an exec changed a row.
func changed(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}
