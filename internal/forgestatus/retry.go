package forgestatus

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/ghapi"
)

// Retry policy (one for every forge): 5xx, 429, GitHub's primary and
// secondary rate limits (403 with Retry-After, X-RateLimit-Remaining: 0 or
// a "rate limit" message) and transport failures are retried; any other
// 4xx is recorded and not retried until the state to send changes.
const (
	backoffBase = time.Second
	backoffMax  = 5 * time.Minute
	// maxHeaderWait caps how far a Retry-After or X-RateLimit-Reset may
	// push the next attempt.
	maxHeaderWait = time.Hour
)

// verdict is what a failed delivery means.
type verdict struct {
	status    int // HTTP status, 0 = no answer
	permanent bool
	next      time.Time
	msg       string
}

// classify turns a delivery error into a verdict; attempts is how many
// deliveries of this state failed before.
func classify(err error, attempts int, now time.Time) verdict {
	status, header, msg := 0, http.Header(nil), err.Error()
	var ge *ghapi.APIError
	var he *httpError
	switch {
	case errors.As(err, &ge):
		status, header = ge.StatusCode, ge.Header
	case errors.As(err, &he):
		status, header = he.status, he.header
	}
	v := verdict{status: status, msg: truncate(msg, 500)}
	rateLimited := status == http.StatusTooManyRequests ||
		(status == http.StatusForbidden && (header.Get("Retry-After") != "" || header.Get("X-RateLimit-Remaining") == "0" ||
			strings.Contains(strings.ToLower(msg), "rate limit")))
	if status != 0 && status < 500 && !rateLimited {
		v.permanent = true
		return v
	}
	wait := backoff(attempts)
	if w, ok := headerWait(header, now); ok {
		wait = w
	}
	v.next = now.Add(wait)
	return v
}

// backoff is 1 s, 2 s, 4 s, … capped at 5 minutes.
func backoff(attempts int) time.Duration {
	if attempts > 20 {
		return backoffMax
	}
	return min(backoffBase<<attempts, backoffMax)
}

// headerWait reads Retry-After (seconds or an HTTP date) and, when the
// quota is spent, X-RateLimit-Reset (epoch seconds; GitHub and GitLab).
func headerWait(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, maxHeaderWait), true
		}
		if t, err := http.ParseTime(ra); err == nil {
			return min(max(t.Sub(now), 0), maxHeaderWait), true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return min(max(time.Unix(s, 0).Sub(now), 0)+time.Second, maxHeaderWait), true
		}
	}
	return 0, false
}
