// Package wait is the tests' one way to wait: poll a condition until it
// holds or a deadline passes, instead of sleeping a fixed time (which
// flakes on a loaded machine and wastes time on an idle one).
package wait

import (
	"context"
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 50 * time.Millisecond

// Until checks cond every Interval until it holds (true) or timeout has
// passed (false); cond is checked at least once.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(Interval)
	}
	return true
}

// For is Until that fails the test, naming what it waited for, when cond
// does not hold within timeout.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Elapse lets d of wall-clock time go by, or less when ctx ends first, and
// reports whether all of d went by. It is for tests where time passing is
// itself the point, not for waiting on an event (use For, Until or a
// channel for that): a slow client pacing the bytes it sends, a wall clock
// moving past a timestamp the code stored, or a window that must pass
// without something happening (a retry, a flush, a second call) before the
// test can say it did not happen.
func Elapse(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
