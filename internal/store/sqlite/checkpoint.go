package sqlite

import (
	"context"
	"database/sql"
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

// checkpointRetryMax bounds the wait between attempts when a checkpoint
// could not copy every frame back (a reader held an older snapshot, or
// another connection was checkpointing) and no write came since: the
// checkpointer tries again, backing off from checkpointEvery to this.
// Writes still get a checkpoint checkpointEvery after them.
const checkpointRetryMax = 5 * time.Second

// checkpointer runs PASSIVE checkpoints of one database after writes.
type checkpointer struct {
	db     *sql.DB
	wrote  chan struct{} // signalled (never blocking) when a writer finishes
	ctx    context.Context
	cancel context.CancelFunc // ends a checkpoint in progress and the loop
	done   chan struct{}
}

// startCheckpointer starts checkpointing db after each signal on wrote;
// close stops it.
func startCheckpointer(db *sql.DB, wrote chan struct{}) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, wrote: wrote, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer close(c.done)
	left := false // the last checkpoint left frames to copy
	retry := checkpointEvery
	for {
		var again <-chan time.Time
		if left {
			again = time.After(retry)
		}
		select {
		case <-c.ctx.Done():
			return
		case <-c.wrote:
			// Let the writes of the next interval gather: one checkpoint
			// copies a page changed by many of them once.
			retry = checkpointEvery
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(checkpointEvery):
			}
		case <-again:
			// No write since a checkpoint that left frames behind (a
			// reader held an older snapshot): with synchronous=NORMAL a
			// commit reaches the disk at the checkpoint that copies it,
			// so try again, further apart each time.
			retry = min(2*retry, checkpointRetryMax)
		}
		left = !c.checkpoint()
	}
}

// checkpoint runs one PASSIVE checkpoint and reports whether it copied
// every frame of the log back. It goes through QueryRow, not Exec: the
// writer connections take the writer semaphore for an Exec outside a
// transaction, and this must not.
func (c *checkpointer) checkpoint() bool {
	ctx, cancel := context.WithTimeout(c.ctx, BusyTimeout)
	defer cancel()
	// busy is 1 when another connection held the checkpoint lock; logFrames
	// and copied are -1 when the checkpoint could not run.
	var busy, logFrames, copied int
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied)
	return err == nil && busy == 0 && copied >= 0 && copied == logFrames
}

// close stops the checkpointer, ending a checkpoint in progress, and
// waits for it to stop. A nil checkpointer does nothing, nor does a second
// close (a store may be closed twice).
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}
