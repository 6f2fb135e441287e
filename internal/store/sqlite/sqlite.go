// Package sqlite is the embedded default implementation of store.Store, on
// modernc.org/sqlite (pure Go, no cgo).
//
// The database runs in WAL mode with a busy timeout and foreign keys on, and
// every transaction begins IMMEDIATE so writers serialise on the database
// lock instead of failing on a lock upgrade; plain reads stay concurrent.
// Times are stored as INTEGER Unix milliseconds (UTC), so they round-trip
// exactly to the millisecond. JSON values (labels, needs, matrix values) are
// TEXT columns where NULL stands for a Go nil and "[]"/"{}" for an empty
// list or map. Schema migrations (goose, embedded) are applied by Open.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

//go:embed migrations/sqlite/*.sql
var migrationsFS embed.FS

// BusyTimeout is how long a connection waits for the database write lock
// before failing with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Store is the SQLite store.Store. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its parent directories when missing) the
// SQLite database at path, configures WAL, busy timeout, foreign keys and
// immediate transactions, and applies the embedded migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create directory: %w", err)
	}
	// Create the file 0600 before SQLite does: it holds token hashes and
	// webhook secrets, and SQLite gives the -wal and -shm files the database
	// file's permissions.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w (is the directory writable?)", abs, err)
	} else {
		f.Close()
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// Writers serialise on the database lock (IMMEDIATE transactions wait up
	// to BusyTimeout); a few connections let reads proceed concurrently.
	n := runtime.NumCPU()
	if n < 4 {
		n = 4
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	m, err := Migrations(db)
	if err == nil {
		err = m.Up(ctx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{Store: sqlstore.New(db, sqlstore.SQLite(), nil), db: db}, nil
}

// Migrations returns the embedded SQLite migrations bound to db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	fsys, err := fs.Sub(migrationsFS, "migrations/sqlite")
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	return sqlstore.NewMigrations(db, sqlstore.SQLite(), fsys)
}

// ---------------------------------------------------------------- helpers

type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// mapErr turns driver errors into store.ErrConflict / store.ErrNotFound.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %v", store.ErrNotFound, err)
		}
	}
	return err
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

func fromMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

func int64Ptr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	n := v.Int64
	return &n
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

// jsonArg encodes v as JSON text, or NULL when isNil.
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

func rawFrom(v sql.NullString) json.RawMessage {
	if !v.Valid || v.String == "" {
		return nil
	}
	return json.RawMessage(v.String)
}

func decodeJSON(v sql.NullString, dst any) error {
	if !v.Valid {
		return nil
	}
	return json.Unmarshal([]byte(v.String), dst)
}

// listArg encodes a string list as a JSON array (never NULL), for json_each.
func listArg(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l)
	return string(b)
}

// statusCond is a condition on column `status` for a transition: status in
// from, or (nil from) status not terminal. arg is the ?N index to use.
func statusCond(from []string, terminal []string, arg int) (string, any) {
	if from == nil {
		return fmt.Sprintf("status NOT IN (SELECT value FROM json_each(?%d))", arg), listArg(terminal)
	}
	return fmt.Sprintf("status IN (SELECT value FROM json_each(?%d))", arg), listArg(from)
}

func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func collect[T any](rows *sql.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
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

// Column lists still used by this package's ingress code.
const (
	sourceCols     = `id, org_id, name, provider, routing_key, local_path, verification_method, webhook_secret, enabled, created_at`
	agentTokenCols = `id, token_hash, token_prefix, agent_type, created_by, labels, expires_at, revoked_at, created_at`
	deliveryCols   = `id, source_id, org_id, event, payload, status, error, decisions, received_at, processed_at`
)

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
