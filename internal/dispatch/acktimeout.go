package dispatch

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

// ackTimeout is the ack deadline of a dispatch made now: the live value of
// Config.AckTimeoutFunc (the cluster setting dispatch_ack_timeout_ms, KiCI),
// else the static Config.AckTimeout.
func (q *jobQueue) ackTimeout(ctx context.Context) time.Duration {
	if f := q.cfg.AckTimeoutFunc; f != nil {
		if v := f(ctx); v > 0 {
			return v
		}
	}
	return q.cfg.AckTimeout
}

// ackWait is how long the ack timer of a claimed entry runs: until the ack
// deadline stored with the claim (so the timer and the stored deadline
// agree), else a fresh ackTimeout.
func (q *jobQueue) ackWait(ctx context.Context, e *store.QueueEntry) time.Duration {
	if e.AckDeadline != nil {
		if w := time.Until(*e.AckDeadline); w > 0 {
			return w
		}
		return time.Millisecond
	}
	return q.ackTimeout(ctx)
}
