package forgestatus

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A forge call retried in the background stops when the reporter's Run
// returns: the wait before the next attempt (here the forge's
// Retry-After of 30 s) ends at once and no further attempt is made, so
// shutdown neither waits on nor leaks it. The bubble's clock is fake.
func TestBackgroundRetryEndsWithRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, Config{})
		r.sources["s"] = srcInfo{t: &target{provider: "gitea"}, ok: true, at: r.now()}
		var calls atomic.Int32
		r.background(context.Background(), "s", "a/b", "comment reply", func(context.Context, *target) error {
			calls.Add(1)
			return &httpError{status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {"30"}}, msg: "down"}
		})
		synctest.Wait() // the first attempt failed; the retry waits 30 s
		r.endLife()     // what Run does when it returns
		<-time.After(time.Minute)
		if n := calls.Load(); n != 1 {
			t.Fatalf("attempts after Run returned: %d, want only the first", n)
		}
	})
}
