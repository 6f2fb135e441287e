package sqlite

import (
	"context"
	"database/sql/driver"
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

// writerConnector opens modernc connections that share one writer
// semaphore.
type writerConnector struct {
	dsn    string
	drv    *msqlite.Driver
	writer *writerQueue // held by the writing connection
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
	return &writerConn{innerConn: inner, writer: c.writer}, nil
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

// writerConn is a connection whose writes take the writer semaphore.
// database/sql uses one connection from one goroutine at a time.
type writerConn struct {
	innerConn
	writer *writerQueue
	inTx   bool // holds the semaphore for its open transaction
	// stmts are this connection's prepared statements by SQL text
	// (stmtcache.go).
	stmts map[string]*cachedStmt
}

// acquire waits for the writer semaphore (writerqueue.go).
func (c *writerConn) acquire(ctx context.Context) error { return c.writer.acquire(ctx) }

func (c *writerConn) release() { c.writer.release() }

// BeginTx takes the semaphore until the transaction ends.
func (c *writerConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	tx, err := c.innerConn.BeginTx(ctx, opts)
	if err != nil {
		c.release()
		return nil, err
	}
	c.inTx = true
	return &writerTx{Tx: tx, c: c}, nil
}

// Begin is BeginTx without a context.
func (c *writerConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// ExecContext takes the semaphore outside a transaction.
func (c *writerConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.inTx {
		return c.exec(ctx, query, args)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	return c.exec(ctx, query, args)
}

// QueryContext takes the semaphore for a writing query outside a
// transaction, until its rows are closed.
func (c *writerConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.inTx || !writes(query) {
		return c.query(ctx, query, args)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	rows, err := c.query(ctx, query, args)
	if err != nil {
		c.release()
		return nil, err
	}
	return &writerRows{Rows: rows, release: c.release}, nil
}

// PrepareContext returns a statement whose executions take the semaphore
// like the connection's.
func (c *writerConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
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
	if t.c.inTx {
		t.c.inTx = false
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
	if s.c.inTx {
		return s.innerStmt.ExecContext(ctx, args)
	}
	if err := s.c.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.c.release()
	return s.innerStmt.ExecContext(ctx, args)
}

func (s *writerStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.c.inTx || !s.writes {
		return s.innerStmt.QueryContext(ctx, args)
	}
	if err := s.c.acquire(ctx); err != nil {
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
