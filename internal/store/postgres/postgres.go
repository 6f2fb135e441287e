// Package postgres is the PostgreSQL implementation of store.Store, on
// pgx/v5 with a pgxpool connection pool.
//
// Claims use one statement, UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP
// LOCKED LIMIT 1) RETURNING …, so concurrent claimants never get the same
// entry and never block each other. Times are timestamptz written at
// millisecond precision and read back in UTC. Labels, needs and matrix
// values are jsonb (SQL NULL stands for a Go nil, "[]"/"{}" for an empty
// list or map); job config and decision traces are stored verbatim as text,
// delivery payloads as bytea. Schema migrations (goose, embedded) are
// applied by Open.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

//go:embed migrations/postgres/*.sql
var migrationsFS embed.FS

// Store is the PostgreSQL store.Store. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or key=value
// DSN), checks the connection and applies the embedded migrations.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
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
		err = m.Up(ctx)
	}
	if err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return &Store{Store: sqlstore.New(db, sqlstore.Postgres(), pool.Close), pool: pool}, nil
}

// Migrations returns the embedded PostgreSQL migrations bound to db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	fsys, err := fs.Sub(migrationsFS, "migrations/postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	return sqlstore.NewMigrations(db, sqlstore.Postgres(), fsys)
}

// Pool returns the underlying connection pool (for diagnostics and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ---------------------------------------------------------------- helpers

type scanner interface{ Scan(dest ...any) error }

// mapErr turns driver errors into store.ErrConflict / store.ErrNotFound.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%w: %v", store.ErrNotFound, err)
		}
	}
	return err
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// ts is the stored form of a time: UTC, millisecond precision.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func tsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func strArg(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func int64Arg(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// jsonArg encodes v as JSON text for a jsonb column, or NULL when isNil.
func jsonArg(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func rawArg(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

func rawFrom(v *string) json.RawMessage {
	if v == nil || *v == "" {
		return nil
	}
	return json.RawMessage(*v)
}

func decodeJSON(b []byte, dst any) error {
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, dst)
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// statusCond is a condition on column `status` for a transition: status in
// from, or (nil from) status not terminal. arg is the $N index to use.
func statusCond(from []string, terminal []string, arg int) (string, any) {
	if from == nil {
		return fmt.Sprintf("NOT (status = ANY($%d::text[]))", arg), terminal
	}
	return fmt.Sprintf("status = ANY($%d::text[])", arg), from
}

func affected(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

func changed(tag pgconn.CommandTag, err error) (bool, error) {
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() > 0, nil
}

func collect[T any](rows pgx.Rows, err error, scan func(scanner) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
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

// Column lists still used by this package's ingress code.
const (
	sourceCols     = `id, org_id, name, provider, routing_key, local_path, verification_method, webhook_secret, enabled, created_at`
	agentTokenCols = `id, token_hash, token_prefix, agent_type, created_by, labels, expires_at, revoked_at, created_at`
	deliveryCols   = `id, source_id, org_id, event, payload, status, error, decisions, received_at, processed_at`
)
