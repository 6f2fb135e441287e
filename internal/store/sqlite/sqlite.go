// Package sqlite is the embedded default implementation of store.Store, on
// modernc.org/sqlite (pure Go, no cgo).
//
// The database runs in WAL mode with a busy timeout and foreign keys on, and
// every transaction begins IMMEDIATE so writers serialise on the database
// lock instead of failing on a lock upgrade; plain reads stay concurrent.
// A store's log is checkpointed by a goroutine of its own, not by the
// writer whose commit fills it (checkpoint.go).
// Times are stored as INTEGER Unix milliseconds (UTC), so they round-trip
// exactly to the millisecond. JSON values (labels, needs, matrix values) are
// TEXT columns where NULL stands for a Go nil and "[]"/"{}" for an empty
// list or map. The queries are store/sqlstore's, in its SQLite dialect;
// this package opens the database and applies the store's goose migrations
// (rendered for SQLite by store/sqlstore).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlstore"
)

// BusyTimeout is how long a connection waits for the database write lock
// before failing with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Store is the SQLite store.Store (store/sqlstore over this package's
// database). It is safe for concurrent use.
type Store = sqlstore.Store

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its parent directories when missing) the
// SQLite database at path, configures WAL, busy timeout, foreign keys and
// immediate transactions, and applies the store's migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, true, func(m *sqlstore.Migrations) error { return m.Up(ctx) })
}

// OpenCurrent opens the existing SQLite database at path without migrating
// it: a missing file is an error, and a schema at another version than this
// binary's migrations gives a *sqlstore.SchemaMismatchError (for tools that
// must not change the schema under a running orchestrator).
func OpenCurrent(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, false, func(m *sqlstore.Migrations) error { return m.CheckVersion(ctx) })
}

// OpenAsIs opens the existing SQLite database at path and neither
// migrates nor checks its schema: for the migration commands, which
// change or report the schema themselves (a missing file is an error).
func OpenAsIs(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, false, func(*sqlstore.Migrations) error { return nil })
}

func open(ctx context.Context, path string, create bool, schema func(*sqlstore.Migrations) error) (*Store, error) {
	db, ckpt, err := openWith(ctx, path, create, true)
	if err != nil {
		return nil, err
	}
	m, err := Migrations(db)
	if err == nil {
		err = schema(m)
	}
	if err != nil {
		db.Close()
		ckpt.close()
		return nil, err
	}
	return sqlstore.New(db, sqlstore.SQLite(), ckpt.close), nil
}

// openDB opens the database at path with kici's settings, for a short
// task (a backup, a restore marker): its writers checkpoint the log
// themselves, as SQLite does by default. create makes the file (0600) and
// its directories when missing.
func openDB(ctx context.Context, path string, create bool) (*sql.DB, error) {
	db, _, err := openWith(ctx, path, create, false)
	return db, err
}

// openWith opens the database at path with kici's settings. With
// background, the log is checkpointed by a checkpointer of its own
// (checkpoint.go), returned for the caller to close after the database;
// else ckpt is nil and closing it does nothing.
func openWith(ctx context.Context, path string, create, background bool) (db *sql.DB, ckpt *checkpointer, err error) {
	if path == "" {
		return nil, nil, errors.New("sqlite: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: %w", err)
	}
	if !create {
		if _, err := os.Stat(abs); err != nil {
			return nil, nil, fmt.Errorf("sqlite: no database at %s: %w", abs, err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return nil, nil, fmt.Errorf("sqlite: create directory: %w", err)
		}
		// Create the file 0600 before SQLite does: it holds token hashes and
		// webhook secrets, and SQLite gives the -wal and -shm files the
		// database file's permissions.
		f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlite: open %s: %w (is the directory writable?)", abs, err)
		}
		f.Close()
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if background {
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walBackstopPages))
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
	// Writers of this process queue on one semaphore rather than on
	// SQLite's sleeping busy handler (writer.go).
	connector := newWriterConnector(dsn)
	db = sql.OpenDB(connector)
	// Writers queue on the semaphore; reads (WAL) run concurrently. A
	// connection is held by a call while it waits for the writer, so the
	// pool is sized for the callers that may wait at once (webhook
	// accepts, the delivery pool, dispatch, sweeps), not for the cores:
	// with too few, reads queue behind waiting writers.
	n := max(4*runtime.NumCPU(), 16)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	if background {
		ckpt = startCheckpointer(db, connector.writer.notifyReleases())
	}
	return db, ckpt, nil
}

// Migrations returns the store's migrations, rendered for SQLite, bound to
// db.
func Migrations(db *sql.DB) (*sqlstore.Migrations, error) {
	return sqlstore.NewMigrations(db, sqlstore.SQLite())
}
