package auth

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of a FailureLimiter: a client may fail DefaultFailureBurst
// token checks in a row, then one more every DefaultFailureInterval (10
// a minute), so guessing a 256-bit token stays hopeless and a person who
// mistypes is never locked out for long.
const (
	DefaultFailureBurst    = 10
	DefaultFailureInterval = 6 * time.Second
	// maxTrackedClients bounds the limiter's memory: past it, clients
	// whose budget is whole again are forgotten.
	maxTrackedClients = 10000
)

// FailureLimiter throttles failed credential checks per client address
// (a token bucket per address, golang.org/x/time/rate): each failure
// takes one token, and while a client has none left every check from it
// is refused before the credential is looked at, right or wrong, so the
// refusal is no oracle. Successes cost nothing. Safe for concurrent use;
// a nil *FailureLimiter throttles nothing.
type FailureLimiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

// NewFailureLimiter returns a limiter that lets a client fail burst checks
// in a row and then one every interval.
func NewFailureLimiter(burst int, interval time.Duration) *FailureLimiter {
	return &FailureLimiter{every: interval, burst: burst, now: time.Now, clients: map[string]*rate.Limiter{}}
}

// RetryAfter reports how long client must wait before its next check; 0
// when it may check now.
func (l *FailureLimiter) RetryAfter(client string) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.clients[client]
	if !ok {
		return 0
	}
	now := l.now()
	if lim.TokensAt(now) >= 1 {
		return 0
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d
}

// Fail records one failed check from client.
func (l *FailureLimiter) Fail(client string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	lim, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= maxTrackedClients {
			l.forgetWholeLocked(now)
		}
		lim = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.clients[client] = lim
	}
	lim.AllowN(now, 1)
}

// forgetWholeLocked drops the clients whose budget has refilled: they are
// indistinguishable from clients never seen.
func (l *FailureLimiter) forgetWholeLocked(now time.Time) {
	for c, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, c)
		}
	}
}

// ClientAddr is the address a request is throttled by: its remote IP,
// the port dropped (behind a reverse proxy, the proxy's).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// TooManyFailures writes the 429 answer of a throttled client: the
// Retry-After header (SetRetryAfter) and the message as JSON.
func TooManyFailures(w http.ResponseWriter, d time.Duration) {
	SetRetryAfter(w, d)
	writeError(w, http.StatusTooManyRequests, ThrottledMessage(d))
}

// SetRetryAfter sets the Retry-After header (RFC 9110 §10.2.3) to d in
// whole seconds, rounded up, at least 1.
func SetRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(d)))
}

// ThrottledMessage says why a client is refused and when to retry.
func ThrottledMessage(d time.Duration) string {
	return fmt.Sprintf("Too many failed token checks from this address; retry in %d s", retrySeconds(d))
}

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
