package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Every write of the process runs on one connection, so that connection's
// page cache stays valid between writes: a temporary table, which only
// the connection that created it can see, takes inserts from plain
// statements, RETURNING queries and transactions made through many pool
// connections at once, while a read through the pool does not see it.
func TestWritesRunOnOneConnection(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TEMP TABLE w (id TEXT PRIMARY KEY)`)
	db.SetMaxIdleConns(8)
	const workers, each = 12, 30
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%d-%d", w, i)
				var err error
				switch i % 3 {
				case 0:
					_, err = db.ExecContext(ctx, `INSERT INTO temp.w (id) VALUES (?)`, id)
				case 1:
					var got string
					err = db.QueryRowContext(ctx, `INSERT INTO temp.w (id) VALUES (?) RETURNING id`, id).Scan(&got)
				default:
					tx, terr := db.BeginTx(ctx, nil)
					if terr != nil {
						err = terr
						break
					}
					if _, err = tx.ExecContext(ctx, `INSERT INTO temp.w (id) VALUES (?)`, id); err != nil {
						_ = tx.Rollback()
						break
					}
					var n int
					if err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM temp.w WHERE id = ?`, id).Scan(&n); err == nil && n != 1 {
						err = fmt.Errorf("the transaction does not read its own insert")
					}
					if err != nil {
						_ = tx.Rollback()
						break
					}
					err = tx.Commit()
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", id, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A writing statement sees every row (RETURNING counts its own too).
	var n int
	if err := db.QueryRowContext(ctx, `INSERT INTO temp.w (id) VALUES ('last') RETURNING (SELECT COUNT(*) FROM temp.w)`).Scan(&n); err != nil || n != workers*each+1 {
		t.Fatalf("rows seen by the writing connection = %d (%v), want %d", n, err, workers*each+1)
	}
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM temp.w`).Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("a read through the pool saw the writing connection's temporary table (err %v): reads should run on connections of their own", err)
	}
}

// Prepared statements write on the shared connection too, and run in the
// transaction they were prepared in or brought into: a write prepared on
// the database reaches the writing connection's temporary table, and one
// prepared in a transaction is seen by that transaction's reads.
func TestPreparedStatementsWriteOnTheSharedConnection(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TEMP TABLE w (id TEXT PRIMARY KEY)`)
	ins, err := db.PrepareContext(ctx, `INSERT INTO temp.w (id) VALUES (?)`)
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	if _, err := ins.ExecContext(ctx, "a"); err != nil {
		t.Fatalf("prepared write outside a transaction: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, "b"); err != nil {
		t.Fatalf("prepared write brought into a transaction: %v", err)
	}
	inTx, err := tx.PrepareContext(ctx, `INSERT INTO temp.w (id) VALUES (?)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.ExecContext(ctx, "c"); err != nil {
		t.Fatalf("write prepared in a transaction: %v", err)
	}
	count, err := tx.PrepareContext(ctx, `SELECT COUNT(*) FROM temp.w`)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := count.QueryRowContext(ctx).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows seen in the transaction = %d (%v), want 3", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Closing the database while a transaction runs lets it finish: the
// shared writing connection closes after the commit, not under it, and
// the transaction's rows are kept.
func TestCloseWaitsForTheRunningWrite(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{}, 1)
	closing = func() { started <- struct{}{} }
	defer func() { closing = nil }()
	path := filepath.Join(t.TempDir(), "kici.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	db := s.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE c (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO c (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-started // the connector is closing, and waits for the transaction
	if _, err := tx.ExecContext(ctx, `INSERT INTO c (id) VALUES (2)`); err != nil {
		t.Fatalf("write in the running transaction after close began: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after close began: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var n int
	if err := s2.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM c`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after reopening = %d (%v), want 2", n, err)
	}
}

// closeCounter is a driver connection that only counts its closes.
type closeCounter struct {
	innerConn
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// A shared connection the driver reports broken is forgotten at once and
// closed when its holder lets the writer go, and the error the caller sees
// is no longer driver.ErrBadConn (which would make database/sql discard a
// healthy pool connection and retry on others sharing the broken one).
func TestBrokenWritingConnectionIsReplaced(t *testing.T) {
	ctx := context.Background()
	c := newWriterConnector("file::memory:")
	broken := &closeCounter{}
	w := &dbConn{innerConn: broken}
	c.shared = w
	if err := c.writer.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.checkWrite(w, fmt.Errorf("step: %w", driver.ErrBadConn))
	if err == nil || errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("checkWrite = %v, want an error that is not driver.ErrBadConn", err)
	}
	if c.shared != nil || broken.closes != 0 {
		t.Fatalf("after checkWrite: shared %v, closes %d; want forgotten, not yet closed (its holder may still use it)", c.shared, broken.closes)
	}
	if err := c.releaseWriter(w); err != nil {
		t.Fatal(err)
	}
	if broken.closes != 1 {
		t.Fatalf("closes after release = %d, want 1", broken.closes)
	}
	if err := c.checkWrite(nil, errors.New("constraint failed")); err == nil || err.Error() != "constraint failed" {
		t.Fatalf("other errors pass unchanged: %v", err)
	}
}
