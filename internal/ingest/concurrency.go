package ingest

import (
	"context"

	"github.com/google/uuid"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// GroupEnterer records a run in its workflow's concurrency group before the
// run is created (implemented by runctl.Controller).
type GroupEnterer interface {
	// EnterGroup records run (not created yet) in the group cfg names,
	// rendered for event; without a group (cfg nil or without one) it
	// writes nothing but may note that the run has none, so admitting
	// the run need not look for its group.
	EnterGroup(ctx context.Context, run *store.Run, cfg *lockfile.Concurrency, event string) error
}

// enterGroup records run in wf's concurrency group, if any; a run without
// one is told too (see GroupEnterer).
func (p *Processor) enterGroup(ctx context.Context, wf *lockfile.Workflow, run *store.Run, event string) error {
	if p.groups == nil {
		return nil
	}
	return p.groups.EnterGroup(ctx, run, wf.Concurrency, event)
}

// NewRunID returns a new run id: a version 7 UUID (RFC 9562), which grows
// with time and, within this process, with each call. A workflow's
// concurrency group orders its runs by (created_at, run id), and two runs
// of a group can be created within one millisecond (created_at's
// resolution): a time-ordered id keeps them in creation order where a
// random one could let the older push cancel the newer.
func NewRunID() string { return uuid.Must(uuid.NewV7()).String() }

// NewJobID returns a new job id, a version 7 UUID like NewRunID. Jobs are
// the most inserted rows of a delivery, and their id is the key of the
// jobs table, the dispatch queue and the forge-status tracking: a random
// id lands each insert on a random page of each of those indexes, which a
// write-ahead log then writes whole; a time-ordered one appends to the
// last page, which the jobs of a burst share.
func NewJobID() string { return uuid.Must(uuid.NewV7()).String() }
