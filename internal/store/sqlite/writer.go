package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

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
// pages of each index it touched again (in a burst of webhooks, 6.5 % of
// the orchestrator's CPU samples were those reads). The shared writer is
// the only connection of the process that changes the database (but for
// a writing query writes() below does not recognise), so its cache stays
// warm.

// writerConnector opens modernc connections that share one writer
// semaphore.
type writerConnector struct {
	dsn    string
	drv    *msqlite.Driver
	writer *writerQueue // held by the writing connection

	// shared is the connection every write runs on, opened at the first
	// write (and again after it broke); used only by the semaphore's
	// holder (Close takes the semaphore too). closed refuses writes once
	// the database is closing.
	shared *dbConn
	closed atomic.Bool
}

func newWriterConnector(dsn string) *writerConnector {
	return &writerConnector{dsn: dsn, drv: &msqlite.Driver{}, writer: &writerQueue{}}
}

// Connect implements driver.Connector.
func (c *writerConnector) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := c.open()
	if err != nil {
		return nil, err
	}
	return &writerConn{dbConn: &dbConn{innerConn: inner}, connector: c}, nil
}

// open opens a driver connection to the database.
func (c *writerConnector) open() (innerConn, error) {
	cn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := cn.(innerConn)
	if !ok {
		cn.Close()
		return nil, fmt.Errorf("sqlite: driver connection %T lacks the context interfaces", cn)
	}
	return inner, nil
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
		_ = c.connector.releaseWriter(nil)
		return nil, err
	}
	return w, nil
}

// release lets the writer semaphore go after a write on w. An error of
// closing the shared connection, when the database closed meanwhile, has
// no one to go to: the write itself is done.
func (c *writerConn) release(w *dbConn) { _ = c.connector.releaseWriter(w) }

// BeginTx takes the semaphore until the transaction ends; the
// transaction runs on the shared writing connection.
func (c *writerConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	w, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := w.BeginTx(ctx, opts)
	if err != nil {
		err = c.connector.checkWrite(w, err)
		c.release(w)
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
		res, err := c.tx.exec(ctx, query, args)
		return res, c.connector.checkWrite(c.tx, err)
	}
	w, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.release(w)
	res, err := w.exec(ctx, query, args)
	return res, c.connector.checkWrite(w, err)
}

// QueryContext reads on the connection's own; a writing query outside a
// transaction runs on the shared one, holding the semaphore until its rows
// are closed.
func (c *writerConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.tx != nil {
		rows, err := c.tx.query(ctx, query, args)
		return rows, c.connector.checkWrite(c.tx, err)
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
		err = c.connector.checkWrite(w, err)
		c.release(w)
		return nil, err
	}
	return &writerRows{Rows: rows, release: func() { c.release(w) }}, nil
}

// PrepareContext returns a statement that runs query through the
// connection's ExecContext and QueryContext: in the open transaction, on
// the shared connection when it writes, on the connection's own when it
// reads, each from that driver connection's cached plan (stmtcache.go).
// Nothing is prepared here, so a statement database/sql closes after its
// transaction has handed the shared connection on touches no connection,
// and an error in query shows at its first execution.
func (c *writerConn) PrepareContext(_ context.Context, query string) (driver.Stmt, error) {
	return &writerStmt{c: c, query: query}, nil
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
	w := t.c.tx
	err := t.c.connector.checkWrite(w, f())
	if w != nil {
		t.c.tx = nil
		t.c.release(w)
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

// writerStmt is a statement of a pool connection, run by its SQL text.
type writerStmt struct {
	c     *writerConn
	query string
}

// Close implements driver.Stmt: nothing to release.
func (s *writerStmt) Close() error { return nil }

// NumInput implements driver.Stmt: -1, unknown (database/sql leaves the
// count of arguments to the driver).
func (s *writerStmt) NumInput() int { return -1 }

// Exec implements driver.Stmt; database/sql uses ExecContext.
func (s *writerStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("sqlite: Exec without a context is not supported")
}

// Query implements driver.Stmt; database/sql uses QueryContext.
func (s *writerStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("sqlite: Query without a context is not supported")
}

func (s *writerStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.query, args)
}

func (s *writerStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.query, args)
}

// writes reports whether a statement run through Query may write: it
// starts with INSERT, UPDATE, DELETE or REPLACE, or returns rows it
// changed (RETURNING). A read taken for a write only queues needlessly; a
// write taken for a read runs on the pool connection's own driver
// connection without the semaphore, and meets SQLite's busy handler as
// another process's write would.
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
