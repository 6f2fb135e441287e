package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"

	msqlite "modernc.org/sqlite"
)

// SQLite has one writer at a time. When two connections of the pool write
// at once, the loser does not wait in line: SQLite's busy handler puts it
// to sleep on a fixed back-off (1, 2, 5, 10 … 100 ms) and retries, so
// under concurrent writes (webhook accepts, the delivery pool, dispatch)
// a write that would take a fraction of a millisecond waits tens of
// milliseconds after the lock was already free. The connector below makes
// the writers of this process queue on a Go semaphore instead: a
// transaction (always BEGIN IMMEDIATE here) holds it from begin to commit
// or rollback, a statement outside a transaction that writes holds it for
// its execution (a query with RETURNING until its rows are closed), and
// the next writer starts the moment the previous one ends; writes a client
// waits on go ahead of waiting background writes (writerqueue.go). Reads never
// take it (WAL readers do not block the writer). Other processes opening
// the file still meet SQLite's own lock and busy timeout.
//
// Every write of the process runs on one connection, which the connector
// opens at the first write and the semaphore's holder uses. In WAL mode a
// connection drops its whole page cache when it finds the database changed
// by another connection since its last transaction; with writes spread
// over the pool, nearly every write transaction started cold and read the
// pages of each index it touched again (a seventh of the orchestrator's
// CPU in a burst of webhooks went to those reads). The shared writer is
// the only connection that changes the database, so its cache stays warm.

// writerConnector opens modernc connections that share one writer
// semaphore.
type writerConnector struct {
	dsn    string
	drv    *msqlite.Driver
	writer *writerQueue // held by the writing connection

	// shared is the connection every write runs on, opened at the first
	// write; used only by the semaphore's holder (and Close).
	shared *dbConn
}

func newWriterConnector(dsn string) *writerConnector {
	return &writerConnector{dsn: dsn, drv: &msqlite.Driver{}, writer: &writerQueue{}}
}

// Connect implements driver.Connector.
func (c *writerConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := cn.(innerConn)
	if !ok {
		cn.Close()
		return nil, fmt.Errorf("sqlite: driver connection %T lacks the context interfaces", cn)
	}
	return &writerConn{dbConn: &dbConn{innerConn: inner}, connector: c}, nil
}

// writeConn is the shared writing connection, opened on first use. The
// caller holds the writer semaphore.
func (c *writerConnector) writeConn() (*dbConn, error) {
	if c.shared != nil {
		return c.shared, nil
	}
	cn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := cn.(innerConn)
	if !ok {
		cn.Close()
		return nil, fmt.Errorf("sqlite: driver connection %T lacks the context interfaces", cn)
	}
	c.shared = &dbConn{innerConn: inner}
	return c.shared, nil
}

// Close closes the shared writing connection; database/sql calls it from
// DB.Close, after the pool's connections (io.Closer on a Connector).
func (c *writerConnector) Close() error {
	if c.shared == nil {
		return nil
	}
	err := c.shared.Close()
	c.shared = nil
	return err
}

// Driver implements driver.Connector.
func (c *writerConnector) Driver() driver.Driver { return c.drv }

// innerConn is what a modernc connection implements.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// writerConn is a pool connection: it reads on a connection of its own
// (the embedded dbConn) and writes, holding the writer semaphore, on the
// connector's shared one. database/sql uses one connection from one
// goroutine at a time.
type writerConn struct {
	*dbConn
	connector *writerConnector
	// tx is the shared connection while this one's transaction is open
	// (it holds the semaphore until the transaction ends), else nil.
	tx *dbConn
}

// acquire waits for the writer semaphore (writerqueue.go) and returns the
// shared writing connection; on error the semaphore is not held.
func (c *writerConn) acquire(ctx context.Context) (*dbConn, error) {
	if err := c.connector.writer.acquire(ctx); err != nil {
		return nil, err
	}
	w, err := c.connector.writeConn()
	if err != nil {
		c.release()
		return nil, err
	}
	return w, nil
}

func (c *writerConn) release() { c.connector.writer.release() }

// BeginTx takes the semaphore until the transaction ends; the
// transaction runs on the shared writing connection.
func (c *writerConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	w, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := w.BeginTx(ctx, opts)
	if err != nil {
		c.release()
		return nil, err
	}
	c.tx = w
	return &writerTx{Tx: tx, c: c}, nil
}

// Begin is BeginTx without a context.
func (c *writerConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// ExecContext runs on the shared writing connection, taking the semaphore
// outside a transaction.
func (c *writerConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.tx != nil {
		return c.tx.exec(ctx, query, args)
	}
	w, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.release()
	return w.exec(ctx, query, args)
}

// QueryContext reads on the connection's own; a writing query outside a
// transaction runs on the shared one, holding the semaphore until its rows
// are closed.
func (c *writerConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.tx != nil {
		return c.tx.query(ctx, query, args)
	}
	if !writes(query) {
		return c.query(ctx, query, args)
	}
	w, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := w.query(ctx, query, args)
	if err != nil {
		c.release()
		return nil, err
	}
	return &writerRows{Rows: rows, release: c.release}, nil
}

// errPrepareInTx: a statement prepared in a transaction would live on the
// shared writing connection, and database/sql closes it only after the
// transaction has released that connection to other writers.
var errPrepareInTx = errors.New("sqlite: statements cannot be prepared inside a transaction here; run them with Exec or Query")

// PrepareContext returns a statement of the connection's own, whose
// executions take the semaphore like the connection's (the store runs its
// statements through Exec and Query, which keep prepared statements
// themselves: stmtcache.go).
func (c *writerConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.tx != nil {
		return nil, errPrepareInTx
	}
	st, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	inner, ok := st.(innerStmt)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("sqlite: driver statement %T lacks the context interfaces", st)
	}
	return &writerStmt{innerStmt: inner, c: c, writes: writes(query)}, nil
}

// Prepare is PrepareContext without a context.
func (c *writerConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// writerTx releases the semaphore when the transaction ends.
type writerTx struct {
	driver.Tx
	c *writerConn
}

func (t *writerTx) Commit() error   { return t.end(t.Tx.Commit) }
func (t *writerTx) Rollback() error { return t.end(t.Tx.Rollback) }

func (t *writerTx) end(f func() error) error {
	err := f()
	if t.c.tx != nil {
		t.c.tx = nil
		t.c.release()
	}
	return err
}

// writerRows releases the semaphore once, when closed.
type writerRows struct {
	driver.Rows
	once    sync.Once
	release func()
}

func (r *writerRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.release)
	return err
}

// innerStmt is what a modernc statement implements.
type innerStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type writerStmt struct {
	innerStmt
	c      *writerConn
	writes bool
}

func (s *writerStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.c.connector.writer.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.c.release()
	return s.innerStmt.ExecContext(ctx, args)
}

func (s *writerStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if !s.writes {
		return s.innerStmt.QueryContext(ctx, args)
	}
	if err := s.c.connector.writer.acquire(ctx); err != nil {
		return nil, err
	}
	rows, err := s.innerStmt.QueryContext(ctx, args)
	if err != nil {
		s.c.release()
		return nil, err
	}
	return &writerRows{Rows: rows, release: s.c.release}, nil
}

// writes reports whether a statement run through Query may write: it
// starts with INSERT, UPDATE, DELETE or REPLACE, or returns rows it
// changed (RETURNING). A read taken for a write only queues needlessly; a
// write taken for a read meets SQLite's busy handler as before.
func writes(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	if len(q) > 7 {
		q7 := strings.ToUpper(q[:7])
		if strings.HasPrefix(q7, "INSERT") || strings.HasPrefix(q7, "UPDATE") ||
			strings.HasPrefix(q7, "DELETE") || strings.HasPrefix(q7, "REPLACE") {
			return true
		}
	}
	return strings.Contains(strings.ToUpper(query), "RETURNING")
}
