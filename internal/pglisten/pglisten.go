// Package pglisten holds a PostgreSQL LISTEN open for as long as a context
// lives: one connection taken out of a pgx pool for good, re-established
// after it is lost. The step-log store's live tail and the cluster bus
// build on it.
package pglisten

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RetryDelay is the wait before listening again after a lost connection.
const RetryDelay = time.Second

// Run LISTENs on channel until ctx ends. Each time the LISTEN is (again) in
// effect it calls listening — notifications sent before then were missed,
// so callers re-check what they wait for — and it calls notify with the
// payload of every notification, in order, on the listening goroutine (so
// notify must not block). A lost
// connection is logged and re-established after RetryDelay. channel must
// be a plain SQL identifier.
func Run(ctx context.Context, pool *pgxpool.Pool, channel string, log *slog.Logger, listening func(), notify func(payload string)) {
	RunTracked(ctx, pool, channel, log, listening, func() {}, notify)
}

// RunTracked is Run that also calls lost, on the listening goroutine, each
// time a LISTEN that was in effect ends (its connection lost, or ctx
// ended): from then until the next listening, notifications are missed.
func RunTracked(ctx context.Context, pool *pgxpool.Pool, channel string, log *slog.Logger, listening, lost func(), notify func(payload string)) {
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, channel, listening, lost, notify)
		if ctx.Err() != nil {
			return
		}
		log.Warn("LISTEN connection lost; listening again", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(RetryDelay):
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, listening, lost func(), notify func(string)) error {
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries a LISTEN: it never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	listening()
	defer lost()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notify(n.Payload)
	}
}
