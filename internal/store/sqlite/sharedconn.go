package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// The shared writing connection's life (writer.go has why every write
// runs on it): opened at the first write, replaced when the driver
// reports it broken, closed with the database once the running write is
// done. Every function here but Close runs while its caller holds the
// writer semaphore, and Close takes it, so one goroutine at a time uses
// the connection.

// errClosed answers a write that comes after the database began closing.
var errClosed = errors.New("sqlite: the database is closed")

// writeConn is the shared writing connection, opened on first use.
func (c *writerConnector) writeConn() (*dbConn, error) {
	if c.closed.Load() {
		return nil, errClosed
	}
	if c.shared != nil {
		return c.shared, nil
	}
	inner, err := c.open()
	if err != nil {
		return nil, err
	}
	c.shared = &dbConn{innerConn: inner}
	return c.shared, nil
}

// checkWrite passes on err from the shared connection w, except that a
// connection the driver reports broken (driver.ErrBadConn) is forgotten,
// so the next writer opens a new one (releaseWriter closes it once its
// holder is done with it, a transaction included), and the error no
// longer reads as ErrBadConn: database/sql would otherwise discard the
// healthy pool connection and retry on others, which share the broken
// one.
func (c *writerConnector) checkWrite(w *dbConn, err error) error {
	if !errors.Is(err, driver.ErrBadConn) {
		return err
	}
	if w != nil && c.shared == w {
		c.shared = nil
	}
	return fmt.Errorf("sqlite: the writing connection failed (%v); the next write opens a new one", err)
}

// releaseWriter lets the writer semaphore go after a write on used (nil
// when none ran). It first closes used if checkWrite forgot it, and the
// shared connection if the database is closing; it returns what closing
// the shared connection returned.
func (c *writerConnector) releaseWriter(used *dbConn) error {
	defer c.writer.release()
	if used != nil && used != c.shared {
		_ = used.Close()
	}
	if !c.closed.Load() || c.shared == nil {
		return nil
	}
	err := c.shared.Close()
	c.shared = nil
	return err
}

// closing, when set (by this package's tests, before any store is
// opened), is called when a connector starts closing.
var closing func()

// Close closes the shared writing connection; database/sql calls it from
// DB.Close (io.Closer on a Connector) without waiting for connections in
// use, so Close waits for the writer semaphore: a running write ends
// before its connection closes, and later writes get errClosed. When a
// write outlasts the writer queue's wait (BusyTimeout), Close returns an
// error and the connection closes when that write lets the semaphore go.
func (c *writerConnector) Close() error {
	c.closed.Store(true)
	if closing != nil {
		closing()
	}
	if err := c.writer.acquire(context.Background()); err != nil {
		return fmt.Errorf("sqlite: a write was still running; the writing connection closes when it ends: %w", err)
	}
	return c.releaseWriter(nil)
}
