package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"kici.dev/kici/internal/store/sqlstore"
	"kici.dev/kici/internal/testutil/wait"
)

// While a write holds the writer, background writes queue first and an
// accept (marked urgent) queues after them; when the writer is freed the
// accept's row is written before the waiting background rows, which then
// land in the order they queued.
func TestUrgentWriteGoesAheadOfWaitingBackgroundWrites(t *testing.T) {
	ctx := context.Background()
	db, q, holder := openHeldQueuedDB(t)
	done := make(chan error, 3)
	write := func(ctx context.Context, id string) { go insertID(ctx, db, id, done) }
	write(ctx, "background-1")
	waitForWaiters(t, q, 0, 1)
	write(ctx, "background-2")
	waitForWaiters(t, q, 0, 2)
	write(sqlstore.WithWritePriority(ctx), "accept")
	waitForWaiters(t, q, 1, 2)
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := idsInWriteOrder(t, db); got != "[accept background-1 background-2]" {
		t.Fatalf("write order %s, want the accept first", got)
	}
}

// A flood of urgent writes does not stall background writes: a waiting
// background write is granted the writer after urgentBurst urgent writes
// in a row, then the remaining urgent writes follow.
func TestBackgroundWriteGetsTurnAfterUrgentBurst(t *testing.T) {
	ctx := context.Background()
	db, q, holder := openHeldQueuedDB(t)
	done := make(chan error, urgentBurst+3)
	write := func(ctx context.Context, id string) { go insertID(ctx, db, id, done) }
	write(ctx, "background")
	waitForWaiters(t, q, 0, 1)
	var want []string
	for i := 1; i <= urgentBurst+2; i++ {
		id := fmt.Sprintf("accept-%d", i)
		write(sqlstore.WithWritePriority(ctx), id)
		waitForWaiters(t, q, i, 1)
		want = append(want, id)
		if i == urgentBurst {
			want = append(want, "background")
		}
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < urgentBurst+3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := idsInWriteOrder(t, db); got != fmt.Sprint(want) {
		t.Fatalf("write order %s, want %v", got, want)
	}
}

// An urgent writer that gives up (its context ends) leaves the line; the
// background writer behind it still gets the writer and the writer is
// free afterwards.
func TestUrgentWriterGivingUpLeavesTheLine(t *testing.T) {
	ctx := context.Background()
	db, q, holder := openHeldQueuedDB(t)
	urgent, cancel := context.WithCancel(sqlstore.WithWritePriority(ctx))
	gaveUp := make(chan error, 1)
	go insertID(urgent, db, "abandoned", gaveUp)
	waitForWaiters(t, q, 1, 0)
	background := make(chan error, 1)
	go insertID(ctx, db, "background", background)
	waitForWaiters(t, q, 1, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned urgent write: %v, want context.Canceled", err)
	}
	waitForWaiters(t, q, 0, 1)
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-background; err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO w (id) VALUES ('after')`); err != nil {
		t.Fatal(err)
	}
	if got := idsInWriteOrder(t, db); got != "[background after]" {
		t.Fatalf("rows %s, want the abandoned write absent", got)
	}
}

// waitForWaiters polls until the writer queue has the given number of
// waiters in each line (the goroutines above have reached their wait).
func waitForWaiters(t *testing.T, q *writerQueue, urgent, background int) {
	t.Helper()
	if !wait.Until(10*time.Second, func() bool { u, b := q.waiters(); return u == urgent && b == background }) {
		u, b := q.waiters()
		t.Fatalf("waiters urgent=%d background=%d, want %d and %d", u, b, urgent, background)
	}
}

// openHeldQueuedDB is openQueuedDB with a transaction holding the writer.
func openHeldQueuedDB(t *testing.T) (*sql.DB, *writerQueue, *sql.Tx) {
	t.Helper()
	db, q := openQueuedDB(t)
	holder, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, q, holder
}

// insertID writes a row with id to table w and sends the outcome on done.
func insertID(ctx context.Context, db *sql.DB, id string, done chan<- error) {
	_, err := db.ExecContext(ctx, `INSERT INTO w (id) VALUES (?)`, id)
	done <- err
}

// openQueuedDB opens a fresh database through the writer connector, with
// one table w, and returns it with its writer queue.
func openQueuedDB(t *testing.T) (*sql.DB, *writerQueue) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	c := newWriterConnector("file:" + path + "?_pragma=journal_mode(WAL)&_txlock=immediate")
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE w (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db, c.writer
}

// idsInWriteOrder lists the ids of table w in the order they were written.
func idsInWriteOrder(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT id FROM w ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ids)
}
