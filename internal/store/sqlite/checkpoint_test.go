package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/wait"
)

// fillLog writes about mib MiB to the database through the store's pool,
// in transactions of 256 KiB, as the orchestrator's writers would.
func fillLog(t *testing.T, s *Store, mib int) {
	t.Helper()
	ctx := context.Background()
	db := s.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE filler (body BLOB NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	row := make([]byte, 4096)
	for tx := 0; tx < mib*4; tx++ {
		t0, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			row[0], row[1] = byte(tx), byte(i) // distinct rows, no compression anywhere
			if _, err := t0.ExecContext(ctx, `INSERT INTO filler (body) VALUES (?)`, row); err != nil {
				t.Fatal(err)
			}
		}
		if err := t0.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// openCheckpointingEvery opens a store on a fresh file whose checkpointer
// waits every after writes; it is closed when the test ends.
func openCheckpointingEvery(t *testing.T, every time.Duration) (*Store, string) {
	t.Helper()
	old := checkpointEvery
	checkpointEvery = every
	t.Cleanup(func() { checkpointEvery = old })
	path := filepath.Join(t.TempDir(), "kici.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A writer no longer copies the log into the database file when the log
// passes SQLite's default 1,000 pages: that copy, inside a commit, held
// every queued writer (webhook accepts among them).
func TestWritersDoNotCheckpointTheLog(t *testing.T) {
	s, path := openCheckpointingEvery(t, time.Hour) // the checkpointer waits: only a writer could copy
	before := fileSize(t, path)
	fillLog(t, s, 8) // over 2,000 pages of log, twice SQLite's default threshold
	if grew := fileSize(t, path) - before; grew > 1<<20 {
		t.Fatalf("the database file grew by %d bytes while the writers wrote 8 MiB: a writer checkpointed the log", grew)
	}
	if wal := fileSize(t, path+"-wal"); wal < 8<<20 {
		t.Fatalf("the log holds %d bytes, want the 8 MiB written", wal)
	}
}

// The checkpointer copies the log into the database file soon after
// writes, without any writer doing it.
func TestCheckpointerCopiesTheLogAfterWrites(t *testing.T) {
	s, path := openCheckpointingEvery(t, 20*time.Millisecond)
	before := fileSize(t, path)
	fillLog(t, s, 2) // below both SQLite's default threshold and the backstop
	wait.For(t, 10*time.Second, "the database file to take in the 2 MiB written (a checkpoint)", func() bool {
		return fileSize(t, path)-before >= 2<<20
	})
	// Everything written reads back, from the file and the log alike.
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM filler`).Scan(&n); err != nil || n != 2*4*64 {
		t.Fatalf("rows = %d, %v; want %d", n, err, 2*4*64)
	}
}

// Closing the store stops the checkpointer, also while it waits to
// checkpoint; closing it again is harmless.
func TestCloseStopsTheCheckpointer(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	path := filepath.Join(t.TempDir(), "kici.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	fillLog(t, s, 1)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return in 5 s")
	}
	s.Close() // a second Close, as deferred cleanups make
	wait.For(t, 5*time.Second, "the store's goroutines, the checkpointer's among them, to end", func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
}

// A checkpoint that a reader kept from copying every frame (its snapshot
// is older) is tried again once the reader is gone, with no further
// write to prompt it: with synchronous=NORMAL that copy is what puts the
// commits on disk.
func TestCheckpointIsRetriedAfterAReaderHeldItBack(t *testing.T) {
	s, path := openCheckpointingEvery(t, 20*time.Millisecond)
	ctx := context.Background()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE early (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	// Another process's reader (a backup, say), its snapshot taken now.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	reader, err := other.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM early`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	fillLog(t, s, 1)
	wait.Elapse(ctx, 300*time.Millisecond) // checkpoints run meanwhile, held back
	if grew := fileSize(t, path) - before; grew >= 1<<20 {
		t.Fatalf("the file took in %d bytes while a reader held an older snapshot", grew)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the checkpointer to copy the log back once the reader is gone", func() bool {
		return fileSize(t, path)-before >= 1<<20
	})
}
