package forgestatus

import (
	"context"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// The reporter subscribes to the tracker: every released and every
// finished job asks for a pass, so a check is created "queued" before an
// agent picks the job up and completed as soon as it ends.
var _ runs.Subscriber = (*Reporter)(nil)

// Admit implements runs.Subscriber: reporting admits every run.
func (r *Reporter) Admit(context.Context, string) bool { return true }

// JobReady implements runs.Subscriber: a pass soon (Kick); never fails.
func (r *Reporter) JobReady(context.Context, *store.Job) error {
	r.Kick()
	return nil
}

// JobFinished implements runs.Subscriber: a pass soon (Kick).
func (r *Reporter) JobFinished(*store.Job) { r.Kick() }

// RunFinished implements runs.Subscriber; the jobs' ends already asked for
// the pass that completes the run's checks.
func (r *Reporter) RunFinished(*store.Run) {}
