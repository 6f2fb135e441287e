package dispatch

import (
	"context"
	"fmt"
	"slices"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// EndLostAgents ends, at orchestrator start, the jobs of agents this node
// spawned before it restarted and that no longer run (scaler.LostAgents):
// started jobs fail at once as lost instead of waiting for the stale
// detector, jobs dispatched but not started go back to the queue. Jobs of
// other agents are untouched.
func (d *Dispatcher) EndLostAgents(ctx context.Context, agentIDs []string) {
	if len(agentIDs) == 0 {
		return
	}
	jobs, err := d.reg.st.ListJobsByStatus(ctx, []status.Job{status.JobRunning, status.JobRecovering, status.JobPending, status.JobQueued})
	if err != nil {
		d.log.Error("list jobs of lost agents", "err", err)
		return
	}
	for _, j := range jobs {
		if j.AgentID == "" || !slices.Contains(agentIDs, j.AgentID) {
			continue
		}
		d.reg.failLost(ctx, j.ID, fmt.Sprintf("agent lost: %s ended while the orchestrator was down", j.AgentID))
	}
	entries, err := d.reg.st.ListQueue(ctx, []string{store.QueueDispatched})
	if err != nil {
		d.log.Error("list queue for lost agents", "err", err)
		return
	}
	for _, e := range entries {
		if !slices.Contains(agentIDs, e.AgentID) {
			continue
		}
		job, err := d.reg.st.GetJob(ctx, e.ID)
		if err != nil || job.Status.IsTerminal() {
			continue
		}
		d.queue.requeueOrFail(ctx, e.ID, e, "agent "+e.AgentID+" ended while the orchestrator was down, before starting the job", e.AgentID)
	}
}
