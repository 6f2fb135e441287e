package sqlstore

import "context"

// writePriorityKey marks a context whose writes go ahead of waiting
// background writes.
type writePriorityKey struct{}

// WithWritePriority returns ctx marked so that, on an engine that runs one
// writer at a time (SQLite), its writes are granted the writer before any
// waiting unmarked write. Used for writes a client is waiting on (the
// webhook accept), so that a burst of background processing writes does
// not stand between a request and its answer. A write already holding the
// writer is never interrupted; order within each level stays first come,
// first served. PostgreSQL ignores the mark.
func WithWritePriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, writePriorityKey{}, true)
}

// HasWritePriority reports whether ctx was marked by WithWritePriority.
func HasWritePriority(ctx context.Context) bool {
	v, _ := ctx.Value(writePriorityKey{}).(bool)
	return v
}
