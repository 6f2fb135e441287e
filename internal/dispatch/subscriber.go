package dispatch

import (
	"context"

	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
)

// The dispatcher subscribes to the tracker (runs.Subscriber) for the jobs
// it releases, and is the scaler's registry of connected agents
// (scaler.Registry); neither side imports the other's implementation.

var _ runs.EntryQueuer = (*Dispatcher)(nil)

// JobReady implements runs.Subscriber: a released job is queued for an
// agent (EnqueueJob).
func (d *Dispatcher) JobReady(ctx context.Context, job *store.Job) error {
	return d.EnqueueJob(ctx, job)
}

// QueueEntry implements runs.EntryQueuer: the entry a released job is
// queued under (pending, created now, its labels and exclude labels).
func (d *Dispatcher) QueueEntry(job *store.Job) *store.QueueEntry { return entryFor(job) }

// JobQueued implements runs.EntryQueuer: the job's entry e was stored with
// its release (or, stored false, one was there already); it is routed as
// EnqueueJob routes a new entry.
func (d *Dispatcher) JobQueued(ctx context.Context, _ *store.Job, e *store.QueueEntry, stored bool) error {
	return d.queue.queued(ctx, e, stored)
}

// Admit implements runs.Subscriber: dispatch admits every run.
func (d *Dispatcher) Admit(context.Context, string) bool { return true }

// JobFinished implements runs.Subscriber: the dispatcher learns of ended
// jobs from their agents, not from the tracker.
func (d *Dispatcher) JobFinished(*store.Job) {}

// RunFinished implements runs.Subscriber; nothing to do.
func (d *Dispatcher) RunFinished(*store.Run) {}

// IdleAgents maps each connected agent's id to whether it runs no job
// (scaler.Registry: warm pools count idle agents ready).
func (d *Dispatcher) IdleAgents() map[string]bool {
	idle := map[string]bool{}
	for _, a := range d.Agents() {
		idle[a.ID] = a.ActiveJobs == 0 && len(a.JobIDs) == 0
	}
	return idle
}

// AgentJobs maps each connected agent's id to the unfinished jobs it owns
// (scaler.Registry: the scaler's status shows the job of a warm pool agent
// handed one through dispatch).
func (d *Dispatcher) AgentJobs() map[string][]string {
	jobs := map[string][]string{}
	for _, a := range d.Agents() {
		jobs[a.ID] = a.JobIDs
	}
	return jobs
}
