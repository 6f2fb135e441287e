package orchestrator

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// cycles closes the construction cycles of the wiring. Three pairs of
// components need each other:
//   - the dispatcher reports job events to the tracker, which enqueues the
//     jobs it releases through the dispatcher;
//   - the scaler asks the dispatcher which agents are idle (warm pools) and
//     tells it when an agent exits, while the dispatcher spawns agents
//     through the scaler;
//   - the tracker asks run control to admit each run (concurrency groups),
//     while run control cancels, ends and re-evaluates runs through the
//     tracker;
//   - the tracker tells the resumer, run control and the pipeline when a
//     run or job finishes, while all three act through the tracker.
//
// The side built first is handed a forwarding value from here (jobEvents,
// idleAgents and agentExited, admitter, runFinished and jobFinished); bind,
// called exactly once in New after all of them are built, points the
// forwarders at the real components.
// No component is changed after its construction. Nothing reaches a
// forwarder before bind: agents connect, runs are created and agents are
// spawned only once the server runs; until then the forwarders answer as
// if the other side were absent.
type cycles struct {
	tracker    atomic.Pointer[runs.Tracker]
	dispatcher atomic.Pointer[dispatch.Dispatcher]
	runctl     atomic.Pointer[runctl.Controller]
	resumer    atomic.Pointer[approval.Resumer]
	processor  atomic.Pointer[ingest.Processor]
}

// bind points the forwarders at the real components; New calls it once.
func (c *cycles) bind(t *runs.Tracker, d *dispatch.Dispatcher, rc *runctl.Controller, res *approval.Resumer, p *ingest.Processor) {
	c.tracker.Store(t)
	c.dispatcher.Store(d)
	c.runctl.Store(rc)
	c.resumer.Store(res)
	c.processor.Store(p)
}

// errUnbound answers job events that arrive before bind (none should).
var errUnbound = errors.New("orchestrator: job event before the tracker was wired")

// jobEvents forwards the dispatcher's dispatch.JobEvents to the tracker.
type jobEvents struct{ c *cycles }

// JobStarted implements dispatch.JobEvents.
func (f jobEvents) JobStarted(ctx context.Context, jobID, agentID string, at time.Time) error {
	if t := f.c.tracker.Load(); t != nil {
		return t.JobStarted(ctx, jobID, agentID, at)
	}
	return errUnbound
}

// JobFinished implements dispatch.JobEvents.
func (f jobEvents) JobFinished(ctx context.Context, jobID string, final status.Job, errMsg string, at time.Time) error {
	if t := f.c.tracker.Load(); t != nil {
		return t.JobFinished(ctx, jobID, final, errMsg, at)
	}
	return errUnbound
}

// StepStatus implements dispatch.JobEvents.
func (f jobEvents) StepStatus(ctx context.Context, s *store.Step) error {
	if t := f.c.tracker.Load(); t != nil {
		return t.StepStatus(ctx, s)
	}
	return errUnbound
}

// idleAgents is the scaler's registry view (scaler.Options.IdleAgents):
// registered agent id → idle (no active job); nil before bind, which keeps
// warm pools waiting.
func (c *cycles) idleAgents() map[string]bool {
	d := c.dispatcher.Load()
	if d == nil {
		return nil
	}
	idle := map[string]bool{}
	for _, a := range d.Agents() {
		idle[a.ID] = a.ActiveJobs == 0 && len(a.JobIDs) == 0
	}
	return idle
}

// agentExited tells the dispatcher that an agent the scaler started ended
// (scaler.Options.Exited).
func (c *cycles) agentExited(agentID string, err error) {
	if d := c.dispatcher.Load(); d != nil {
		d.AgentExited(agentID, err)
	}
}

// admitter forwards the tracker's runs.Admitter to run control; every
// run is admitted before bind, as without concurrency groups.
type admitter struct{ c *cycles }

// Admit implements runs.Admitter.
func (f admitter) Admit(ctx context.Context, runID string) bool {
	if rc := f.c.runctl.Load(); rc != nil {
		return rc.Admit(ctx, runID)
	}
	return true
}

// runFinished tells the components built after the tracker that run ended,
// in the order the orchestrator has always used: the resumer (held work
// waiting on a slot), then metrics (sm, not part of the cycle), run control
// (concurrency groups), then the pipeline (workflow_complete events).
func (c *cycles) runFinished(sm *serverMetrics) []func(*store.Run) {
	return []func(*store.Run){
		func(r *store.Run) {
			if res := c.resumer.Load(); res != nil {
				res.RunFinished(r)
			}
		},
		sm.runFinished,
		func(r *store.Run) {
			if rc := c.runctl.Load(); rc != nil {
				rc.RunFinished(r)
			}
		},
		func(r *store.Run) {
			if p := c.processor.Load(); p != nil {
				p.RunFinished(r)
			}
		},
	}
}

// jobFinished tells the pipeline (job_complete events) that a job ended.
func (c *cycles) jobFinished(j *store.Job) {
	if p := c.processor.Load(); p != nil {
		p.JobFinished(j)
	}
}
