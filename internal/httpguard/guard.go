// Package httpguard protects the orchestrator's HTTP server from clients
// that hold connections open without finishing their requests: a request
// body must keep arriving at a minimum rate, a handler that leaves its body
// unread does not wait for the rest, and requests that are read before any
// credential is checked (webhooks, attestation verification) are capped in
// number, overall and per client address.
//
// net/http's ReadHeaderTimeout bounds only the headers, and its ReadTimeout
// would also cut the long-lived WebSocket and log-following connections,
// so the body deadline is set per request with http.ResponseController.
package httpguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// DefaultBodyGrace is how long any request body may take before the
	// minimum rate applies: 10 s.
	DefaultBodyGrace = 10 * time.Second
	// DefaultMinBodyRate is the average rate, in bytes per second, a body
	// must keep after the grace: 16 KiB/s (a 25 MiB body may take 26 min
	// 40 s at that pace).
	DefaultMinBodyRate = 16 << 10
	// DefaultMaxUnauthenticated caps unauthenticated requests in progress
	// on one orchestrator: 256 (KiCI's KICI_INGEST_MAX_CONCURRENCY default).
	DefaultMaxUnauthenticated = 256
	// DefaultMaxUnauthenticatedPerClient caps them per client IP address:
	// 32 (KiCI's per-org ingest concurrency), so one address cannot take
	// every slot. Behind a reverse proxy every request has the proxy's
	// address and this cap is the proxy's.
	DefaultMaxUnauthenticatedPerClient = 32
)

// Config tunes a Guard; zero fields take the defaults above.
type Config struct {
	BodyGrace                   time.Duration
	MinBodyRate                 int64 // bytes per second
	MaxUnauthenticated          int
	MaxUnauthenticatedPerClient int
}

// Guard holds the limits and the count of unauthenticated requests in
// progress. It is safe for concurrent use.
type Guard struct {
	cfg Config

	mu       sync.Mutex
	total    int
	byClient map[string]int
	freed    chan struct{} // closed (and replaced) whenever a slot is released

	refused atomic.Int64
	cut     atomic.Int64
}

// New returns a Guard with cfg's limits.
func New(cfg Config) *Guard {
	if cfg.BodyGrace <= 0 {
		cfg.BodyGrace = DefaultBodyGrace
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.MaxUnauthenticated <= 0 {
		cfg.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if cfg.MaxUnauthenticatedPerClient <= 0 {
		cfg.MaxUnauthenticatedPerClient = DefaultMaxUnauthenticatedPerClient
	}
	return &Guard{cfg: cfg, byClient: map[string]int{}, freed: make(chan struct{})}
}

// Refused counts unauthenticated requests answered 503 because a cap was
// reached; Cut counts request bodies ended by the read deadline.
func (g *Guard) Refused() int64 { return g.refused.Load() }

// Cut counts request bodies ended because they arrived too slowly.
func (g *Guard) Cut() int64 { return g.cut.Load() }

// Handler wraps next: every request with a body reads it under a deadline
// of BodyGrace + bytes received / MinBodyRate from the request's start
// (renewed as bytes arrive, so a steady upload of any size passes and a
// trickle is cut); a handler that returns without reading its body to the
// end makes the connection close at once instead of waiting for the rest.
// Requests for which unauthenticated(r) is true also need a slot under
// the caps; one that waited the body grace without getting one gets 503
// {"error":...} with Retry-After: 1 and the connection is closed, its body
// unread.
func (g *Guard) Handler(next http.Handler, unauthenticated func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if unauthenticated != nil && unauthenticated(r) {
			client := clientAddr(r)
			if !g.acquire(r.Context(), client) {
				g.refused.Add(1)
				closeNow(w, rc)
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":"too many unauthenticated requests in progress; retry later"}`+"\n")
				return
			}
			defer g.release(client)
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &body{ReadCloser: r.Body, g: g, rc: rc, start: time.Now()}
		b.extend()
		r.Body = b
		next.ServeHTTP(w, r)
		if !b.eof {
			// Let the response go out, then close: net/http would
			// otherwise read up to 256 KiB more of an unread body, at
			// whatever pace the client chooses, to keep the connection.
			closeNow(w, rc)
		}
	})
}

// closeNow marks the connection for closing after the response and makes
// any further read of the request fail at once.
func closeNow(w http.ResponseWriter, rc *http.ResponseController) {
	w.Header().Set("Connection", "close")
	_ = rc.SetReadDeadline(time.Now())
}

// acquire takes a slot for client, waiting up to the body grace for one
// to free (a burst of legitimate deliveries is served in turn; a flood
// holding every slot is refused once the wait is over). It reports false
// when no slot came or ctx ended.
func (g *Guard) acquire(ctx context.Context, client string) bool {
	var timer *time.Timer
	for {
		g.mu.Lock()
		if g.total < g.cfg.MaxUnauthenticated && g.byClient[client] < g.cfg.MaxUnauthenticatedPerClient {
			g.total++
			g.byClient[client]++
			g.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		freed := g.freed
		g.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(g.cfg.BodyGrace)
		}
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}

func (g *Guard) release(client string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.byClient[client]--; g.byClient[client] <= 0 {
		delete(g.byClient, client)
	}
	close(g.freed) // wake the waiters; each re-checks the caps
	g.freed = make(chan struct{})
}

// clientAddr is the request's remote IP address (the port dropped, so one
// host's connections share a count).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// body is a request body read under the rate deadline.
type body struct {
	io.ReadCloser
	g     *Guard
	rc    *http.ResponseController
	start time.Time
	n     int64
	eof   bool
}

// extend moves the read deadline to start + grace + n/rate.
func (b *body) extend() {
	allowed := b.g.cfg.BodyGrace + time.Duration(float64(b.n)/float64(b.g.cfg.MinBodyRate)*float64(time.Second))
	_ = b.rc.SetReadDeadline(b.start.Add(allowed))
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.n += int64(n)
		b.extend()
	}
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		b.g.cut.Add(1)
		err = errors.New("request body arrived too slowly")
	}
	return n, err
}
