package runs

import (
	"context"
	"fmt"
)

// Admitter decides whether the jobs of a run may be released at all
// (workflow concurrency groups, implemented by runctl.Controller; every
// Subscriber is one). A run
// that is not admitted keeps its ready jobs pending until Reevaluate is
// called after it was admitted.
type Admitter interface {
	// Admit reports whether runID may start releasing jobs. It is called
	// under the run's lock and must not call back into the tracker.
	Admit(ctx context.Context, runID string) bool
}

// admission returns a memoised admission check for one evaluation pass:
// the run is admitted when every subscriber admits it.
func (t *Tracker) admission(ctx context.Context, runID string) func() bool {
	decided, ok := false, false
	return func() bool {
		if !decided {
			decided, ok = true, true
			for _, s := range t.subs {
				if !s.Admit(ctx, runID) {
					ok = false
					break
				}
			}
		}
		return ok
	}
}

// Reevaluate releases the ready jobs of a run (e.g. once it was admitted
// to its concurrency group) and completes it if every job is terminal.
func (t *Tracker) Reevaluate(ctx context.Context, runID string) error {
	mu := t.runLock(runID)
	mu.Lock()
	defer mu.Unlock()
	if err := t.evaluateLocked(ctx, runID, t.now()); err != nil {
		return fmt.Errorf("runs: reevaluate run %s: %w", runID, err)
	}
	return nil
}
