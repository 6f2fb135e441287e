package conn

import (
	"math"
	"time"
)

// Reconnect backoff parameters (KiCI shared/src/reconnect-delay.ts).
const (
	BaseDelay   = time.Second
	BackoffBase = 1.5
	MaxDelay    = 60 * time.Second
)

// BackoffDelay is the wait before reconnect attempt n (0-based):
// BaseDelay × 1.5^n × (1 + jitter/2), capped at MaxDelay. jitter is a
// uniform random number in [0, 1), so the factor lies in [1, 1.5).
func BackoffDelay(n int, jitter float64) time.Duration {
	if n < 0 {
		n = 0
	}
	if jitter < 0 {
		jitter = 0
	}
	if jitter >= 1 {
		jitter = math.Nextafter(1, 0)
	}
	d := float64(BaseDelay) * math.Pow(BackoffBase, float64(n)) * (1 + jitter/2)
	if d > float64(MaxDelay) || math.IsInf(d, 0) || math.IsNaN(d) {
		return MaxDelay
	}
	return time.Duration(d)
}
