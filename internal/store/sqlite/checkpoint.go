package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// SQLite copies the write-ahead log back into the database file in a
// checkpoint. By default the connection whose commit takes the log past
// 1,000 pages runs it, inside that commit: here, while it holds the
// writer semaphore (writer.go), so every writer queued behind it — webhook
// accepts among them — waited for the copy and its fsyncs (measured: every
// accept of a burst in flight stalled together for 25–30 ms, several times
// a second). The checkpointer below runs them instead, on a connection of
// its own, off the writers' path: a PASSIVE checkpoint neither takes the
// writer lock nor blocks readers, so writers go on appending to the log
// while it copies. The writers keep SQLite's own checkpoint only as a
// backstop (walBackstopPages), should this one fall far behind.

// checkpointEvery is how long the checkpointer lets writes gather before
// it checkpoints them: at most one checkpoint per interval while writes
// go on, none while the database is idle. A variable for tests.
var checkpointEvery = 250 * time.Millisecond

// walBackstopPages is the writers' own auto-checkpoint threshold, in pages
// (4 KiB): ten times SQLite's default, so that a writer pays for a
// checkpoint only under writes the checkpointer cannot keep up with. It
// also bounds the log's file: SQLite starts the log over from its
// beginning only when a writer finds every frame copied back, which under
// a steady stream of writes may wait for a writer's own checkpoint, and
// the file keeps the largest size it reached until the database is
// closed (measured: 36 MB after a burst of 2,000 webhooks). Cutting it
// back as the log starts over (PRAGMA journal_size_limit) was measured
// too: the commit that cut it held dispatch for 350–510 ms.
const walBackstopPages = 10000

// checkpointer runs PASSIVE checkpoints of one database after writes.
type checkpointer struct {
	db    *sql.DB
	wrote chan struct{} // signalled (never blocking) when a writer finishes
	stop  chan struct{}
	once  sync.Once // closes stop
	done  chan struct{}
}

// startCheckpointer starts checkpointing db after each signal on wrote;
// close stops it.
func startCheckpointer(db *sql.DB, wrote chan struct{}) *checkpointer {
	c := &checkpointer{db: db, wrote: wrote, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wrote:
		}
		// Let the writes of the next interval gather: one checkpoint
		// copies a page changed by many of them once.
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointEvery):
		}
		c.checkpoint()
	}
}

// checkpoint runs one PASSIVE checkpoint. It goes through QueryRow, not
// Exec: the writer connections take the writer semaphore for an Exec
// outside a transaction, and this must not. A failure (the database busy
// with another process's checkpoint, say) is left to the next round or to
// the writers' backstop.
func (c *checkpointer) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), BusyTimeout)
	defer cancel()
	var busy, logFrames, copied int
	_ = c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied)
}

// close stops the checkpointer and waits for a checkpoint in progress. A
// nil checkpointer does nothing, nor does a second close (a store may be
// closed twice).
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
