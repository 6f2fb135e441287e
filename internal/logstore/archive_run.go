package logstore

import (
	"context"
	"log/slog"
	"time"
)

// ArchiveBatch bounds the steps one archive pass (Run) looks at.
const ArchiveBatch = 500

// Run archives the step logs of finished jobs (finished, as for Sweep)
// that have been quiet for quiet, a pass at once and then every interval
// until ctx ends; a failed pass is logged and the next one tries again.
// Every node of a cluster runs it: an archive written twice is the same
// objects, and only one commit removes the live lines. A nil logger
// discards logs.
func (a *Archived) Run(ctx context.Context, quiet, interval time.Duration, finished func(ctx context.Context, runID, jobID string) (bool, error), logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := a.Sweep(ctx, quiet, ArchiveBatch, finished)
		if err != nil && ctx.Err() == nil {
			logger.Warn("log archive pass failed; the next pass tries again", "err", err)
		}
		if n > 0 {
			logger.Info("archived step logs", "steps", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
