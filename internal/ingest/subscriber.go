package ingest

import (
	"context"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// The processor subscribes to the tracker for workflow_complete and
// job_complete events (RunFinished and JobFinished, events.go).
var _ runs.Subscriber = (*Processor)(nil)

// Admit implements runs.Subscriber: ingest admits every run (concurrency
// groups are run control's).
func (p *Processor) Admit(context.Context, string) bool { return true }

// JobReady implements runs.Subscriber; a released job is no event.
func (p *Processor) JobReady(context.Context, *store.Job) error { return nil }
