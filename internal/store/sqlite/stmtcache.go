package sqlite

import (
	"context"
	"database/sql/driver"
	"strings"
)

// The driver prepares (parses and plans) every statement it is given and
// throws the plan away afterwards; database/sql keeps no statements
// either. On the store's hot paths (accepting a webhook, creating a run,
// a dispatch) parsing was a sixth of the orchestrator's CPU. Each
// connection therefore keeps its prepared statements by SQL text and runs
// a statement it has seen before from its plan. SQLite re-prepares a
// cached statement itself when the schema changed.

// maxCachedStmts bounds one connection's statements (the store has a few
// hundred distinct ones); beyond it statements are prepared per call.
const maxCachedStmts = 512

// cachedStmt is a prepared statement of one connection. busy is set while
// rows read from it are open, so a nested use of the same SQL (rows still
// open in a transaction) prepares its own statement instead.
type cachedStmt struct {
	st   innerStmt
	busy bool
}

// cacheable reports whether query is one statement worth keeping: scripts
// (several statements, e.g. migrations) are executed as given.
func cacheable(query string) bool {
	q := strings.TrimRight(query, " \t\r\n;")
	return len(q) < 8192 && !strings.Contains(q, ";")
}

// dbConn is one driver connection with its prepared statements. A
// writerConn reads through a dbConn of its own and writes through the one
// its connector shares among them (writer.go).
type dbConn struct {
	innerConn
	// stmts are the connection's prepared statements by SQL text.
	stmts map[string]*cachedStmt
}

// cached returns the connection's prepared statement for query, preparing
// it on first use; nil when it is not cacheable, in use or cannot be
// prepared (the uncached call then reports the error).
func (c *dbConn) cached(ctx context.Context, query string) *cachedStmt {
	if cs, ok := c.stmts[query]; ok {
		if cs.busy {
			return nil
		}
		return cs
	}
	if !cacheable(query) || len(c.stmts) >= maxCachedStmts {
		return nil
	}
	st, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	inner, ok := st.(innerStmt)
	if !ok {
		st.Close()
		return nil
	}
	if c.stmts == nil {
		c.stmts = map[string]*cachedStmt{}
	}
	cs := &cachedStmt{st: inner}
	c.stmts[query] = cs
	return cs
}

// statementSeen, when set (by this package's tests, before any store is
// opened), is called with the text of every statement about to run.
var statementSeen func(query string)

// exec runs query from its cached statement when it has one.
func (c *dbConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if statementSeen != nil {
		statementSeen(query)
	}
	if cs := c.cached(ctx, query); cs != nil {
		return cs.st.ExecContext(ctx, args)
	}
	return c.innerConn.ExecContext(ctx, query, args)
}

// query runs query from its cached statement when it has one; the
// statement is in use until the rows are closed.
func (c *dbConn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if statementSeen != nil {
		statementSeen(query)
	}
	cs := c.cached(ctx, query)
	if cs == nil {
		return c.innerConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.st.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	cs.busy = true
	return &writerRows{Rows: rows, release: func() { cs.busy = false }}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *dbConn) Close() error {
	for q, cs := range c.stmts {
		_ = cs.st.Close()
		delete(c.stmts, q)
	}
	return c.innerConn.Close()
}
