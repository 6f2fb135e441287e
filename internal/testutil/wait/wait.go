// Package wait is the tests' one way to wait: poll a condition until it
// holds or a deadline passes, instead of sleeping a fixed time (which
// flakes on a loaded machine and wastes time on an idle one).
package wait

import (
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
