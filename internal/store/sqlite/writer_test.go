package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Many goroutines writing at once through the pool (plain statements,
// transactions and RETURNING queries) all succeed, and every row lands:
// writers wait their turn on the writer queue.
func TestConcurrentWritersAllLand(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TABLE w (id TEXT PRIMARY KEY, n INTEGER)`)
	const workers, each = 24, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("%d-%d", w, i)
				var err error
				switch i % 3 {
				case 0:
					_, err = db.ExecContext(ctx, `INSERT INTO w (id, n) VALUES (?, ?)`, id, i)
				case 1:
					var got string
					err = db.QueryRowContext(ctx, `INSERT INTO w (id, n) VALUES (?, ?) RETURNING id`, id, i).Scan(&got)
				default:
					tx, terr := db.BeginTx(ctx, nil)
					if terr != nil {
						err = terr
						break
					}
					if _, err = tx.ExecContext(ctx, `INSERT INTO w (id, n) VALUES (?, ?)`, id, i); err != nil {
						_ = tx.Rollback()
						break
					}
					err = tx.Commit()
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", id, err)
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM w`).Scan(&n); err != nil || n != workers*each {
		t.Fatalf("rows = %d (%v), want %d", n, err, workers*each)
	}
}

// A writer that cannot get its turn before its context ends gets the
// context's error and writes nothing; the queue is free again once the
// holding transaction ends.
func TestWriterWaitEndsWithContext(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TABLE w (id TEXT PRIMARY KEY)`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := db.ExecContext(short, `INSERT INTO w (id) VALUES ('late')`); err == nil {
		t.Fatal("a write went through while a transaction held the writer")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO w (id) VALUES ('after')`); err != nil {
		t.Fatalf("write after the transaction ended: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM w`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d (%v), want only the later write", n, err)
	}
}

// A statement run again while rows of the same SQL are still open in a
// transaction reads correctly (it does not reuse the busy prepared
// statement), and repeated statements return fresh results.
func TestCachedStatementsNestedAndRepeated(t *testing.T) {
	ctx := context.Background()
	db := openWithTable(t, `CREATE TABLE w (id INTEGER PRIMARY KEY)`)
	for i := 1; i <= 3; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO w (id) VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it only returns sql.ErrTxDone
	const q = `SELECT id FROM w WHERE id >= ? ORDER BY id`
	outer, err := tx.QueryContext(ctx, q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for outer.Next() {
		var a int
		if err := outer.Scan(&a); err != nil {
			t.Fatal(err)
		}
		var b int
		if err := tx.QueryRowContext(ctx, q, a).Scan(&b); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, fmt.Sprintf("%d:%d", a, b))
	}
	if err := outer.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pairs) != "[1:1 2:2 3:3]" {
		t.Fatalf("nested reads %v", pairs)
	}
	for i := 1; i <= 3; i++ {
		var got int
		if err := tx.QueryRowContext(ctx, q, i).Scan(&got); err != nil || got != i {
			t.Fatalf("repeat %d: got %d (%v)", i, got, err)
		}
	}
}

// openWithTable opens a fresh store and creates one table in it with ddl.
func openWithTable(t *testing.T, ddl string) *sql.DB {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().ExecContext(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	return s.DB()
}
