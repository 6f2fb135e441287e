package orchestrator

import (
	"context"
	"log/slog"
	"sync"
)

// cleanupStack releases what the server acquired, last acquired first.
// New pushes every resource the moment it holds it (the data-directory
// lock, the store, the step-log store, the scaler, the listener, the
// cluster bus, the endpoint file); Run pushes what it starts. A failed New
// and the end of Run unwind the same stack, so no error path can forget a
// resource and shutdown closes each exactly once.
type cleanupStack struct {
	mu    sync.Mutex
	steps []cleanupStep
}

type cleanupStep struct {
	name string
	fn   func(ctx context.Context) error
}

// push adds a release step; fn gets the shutdown context (bounded) and its
// error is logged, never returned: a failed release must not keep the
// others from running.
func (c *cleanupStack) push(name string, fn func(ctx context.Context) error) {
	c.mu.Lock()
	c.steps = append(c.steps, cleanupStep{name: name, fn: fn})
	c.mu.Unlock()
}

// pushFunc is push for a release without an error.
func (c *cleanupStack) pushFunc(name string, fn func()) {
	c.push(name, func(context.Context) error { fn(); return nil })
}

// unwind runs every step in reverse order and empties the stack; a second
// unwind does nothing.
func (c *cleanupStack) unwind(ctx context.Context, log *slog.Logger) {
	c.mu.Lock()
	steps := c.steps
	c.steps = nil
	c.mu.Unlock()
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].fn(ctx); err != nil {
			log.Warn("releasing "+steps[i].name, "err", err)
		}
	}
}
