package logstore

import (
	"context"
	"sync"
	"time"
)

// wakeups lets readers wait for the next append to a step's log, by a key
// of the backend's choosing (a file path, "<jobId>:<step>"). Both backends
// share it so a live tail behaves the same on files and on PostgreSQL.
type wakeups struct {
	mu sync.Mutex
	m  map[string]chan struct{} // closed on the next append, by key
}

// next returns the channel closed by the next wake of key.
func (w *wakeups) next(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	ch := w.m[key]
	if ch == nil {
		ch = make(chan struct{})
		w.m[key] = ch
	}
	return ch
}

// wake releases every reader waiting on key.
func (w *wakeups) wake(key string) {
	w.mu.Lock()
	if ch := w.m[key]; ch != nil {
		close(ch)
		delete(w.m, key)
	}
	w.mu.Unlock()
}

// wakeAll releases every waiting reader (after a lost notification
// connection, so each re-reads its count).
func (w *wakeups) wakeAll() {
	w.mu.Lock()
	for k, ch := range w.m {
		close(ch)
		delete(w.m, k)
	}
	w.mu.Unlock()
}

// waitForLines blocks until lines() reports more than cursor lines, ctx
// ends (ctx.Err()) or lines fails. It registers for key's next wake before
// each count, so an append between the count and the wait is not missed;
// recheck > 0 also re-counts that often, for a wake that can be lost
// (a notification across nodes).
func (w *wakeups) waitForLines(ctx context.Context, key string, lines func() (int, error), cursor int, recheck time.Duration) error {
	for {
		ch := w.next(key)
		n, err := lines()
		if err != nil {
			return err
		}
		if n > cursor {
			return nil
		}
		var tick <-chan time.Time
		var t *time.Timer
		if recheck > 0 {
			t = time.NewTimer(recheck)
			tick = t.C
		}
		var done bool
		select {
		case <-ch:
		case <-tick:
		case <-ctx.Done():
			done = true
		}
		if t != nil {
			t.Stop()
		}
		if done {
			return ctx.Err()
		}
	}
}
