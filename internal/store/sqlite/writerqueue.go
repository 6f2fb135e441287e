package sqlite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"kici.dev/kici/internal/store/sqlstore"
)

// writerQueue is the writer semaphore of one database (writer.go) with two
// waiting lines: writes marked with sqlstore.WithWritePriority (a webhook
// accept, whose sender waits for the answer) are granted the writer before
// any waiting unmarked write (the background turning of deliveries into
// runs, dispatch), so an accept waits for at most the write in progress
// and other urgent writes, not for a burst of processing writes queued
// ahead of it. So that a flood of accepts does not stall processing
// altogether, a waiting background write gets the writer after at most
// urgentBurst urgent writes in a row. Within a line, first come, first
// served. The writer passes
// directly from the releasing writer to the next in line, so a newcomer
// never overtakes a waiting writer of its own level.
type writerQueue struct {
	mu      sync.Mutex
	held    bool
	waiting [2][]chan struct{} // [urgent, background]; closed when granted
	// urgentRun counts urgent grants since the last background grant.
	urgentRun int
	// released, when set (notifyReleases), is signalled without blocking
	// each time a writer lets go.
	released chan struct{}
}

// notifyReleases returns a channel (capacity one) signalled whenever a
// writer lets go of the semaphore: a signal already pending is not
// doubled, so a slow reader sees one signal for many releases. Call it
// before the queue is used.
func (q *writerQueue) notifyReleases() chan struct{} {
	q.released = make(chan struct{}, 1)
	return q.released
}

// urgentBurst is how many urgent writers may pass a waiting background
// writer in a row.
const urgentBurst = 4

const (
	urgentLine     = 0
	backgroundLine = 1
)

// acquire waits for the writer, as long as SQLite's busy timeout would
// have waited for the lock, or until ctx ends; the error says which.
func (q *writerQueue) acquire(ctx context.Context) error {
	line := backgroundLine
	if sqlstore.HasWritePriority(ctx) {
		line = urgentLine
	}
	q.mu.Lock()
	if !q.held {
		q.held = true
		q.mu.Unlock()
		return nil
	}
	granted := make(chan struct{})
	q.waiting[line] = append(q.waiting[line], granted)
	q.mu.Unlock()

	t := time.NewTimer(BusyTimeout)
	defer t.Stop()
	var err error
	select {
	case <-granted:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("sqlite: database is locked: waited %s for the writer", BusyTimeout)
	}
	q.mu.Lock()
	if q.leave(line, granted) {
		q.mu.Unlock()
		return err
	}
	q.mu.Unlock()
	// Granted while giving up: pass the writer on.
	q.release()
	return err
}

// leave removes a waiter from its line; false when it was already granted.
func (q *writerQueue) leave(line int, granted chan struct{}) bool {
	w := q.waiting[line]
	for i, ch := range w {
		if ch == granted {
			q.waiting[line] = append(w[:i], w[i+1:]...)
			return true
		}
	}
	return false
}

// release hands the writer to the first urgent waiter (unless urgentBurst
// of them went in a row while a background writer waits), else the first
// background waiter, else frees it.
func (q *writerQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.released != nil {
		select {
		case q.released <- struct{}{}:
		default:
		}
	}
	urgent, background := q.waiting[urgentLine], q.waiting[backgroundLine]
	switch {
	case len(urgent) > 0 && (len(background) == 0 || q.urgentRun < urgentBurst):
		q.urgentRun++
		q.grant(urgentLine)
	case len(background) > 0:
		q.urgentRun = 0
		q.grant(backgroundLine)
	default:
		q.urgentRun = 0
		q.held = false
	}
}

// grant passes the writer to the first waiter of line.
func (q *writerQueue) grant(line int) {
	next := q.waiting[line][0]
	q.waiting[line] = q.waiting[line][1:]
	close(next)
}

// waiters returns how many writers wait in each line (urgent, background).
func (q *writerQueue) waiters() (urgent, background int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting[urgentLine]), len(q.waiting[backgroundLine])
}
