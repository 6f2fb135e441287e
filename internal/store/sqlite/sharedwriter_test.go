package sqlite

import (
	"context"
	"fmt"
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

// A statement cannot be prepared inside a transaction (it would outlive
// the transaction on the shared writing connection); the error says what
// to do, and the transaction goes on.
func TestPrepareInTransactionIsRefused(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TABLE p (id INTEGER)`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.PrepareContext(ctx, `INSERT INTO p (id) VALUES (?)`); err == nil || !strings.Contains(err.Error(), "Exec or Query") {
		t.Fatalf("prepare in a transaction: %v, want a refusal naming Exec or Query", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO p (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
