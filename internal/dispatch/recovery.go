package dispatch

import (
	"context"
	"fmt"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// Static agent recovery (see docs/kici-compatibility.md#runs-and-statuses).
// When a static agent's socket ends while it runs jobs, each started job
// becomes "recovering" with a deadline of now + RecoveryWindow. If the
// agent re-registers in time and lists the job in inFlightJobs, the job is
// reclaimed (recovering → running, tracking and slot restored). If it
// re-registers without the job, the job fails at once: the agent restarted
// and lost it. If the deadline passes first, the job fails
// with "agent disconnected and did not reconnect within the recovery
// window". Reclaim is keyed on the job id and the agent that owns it.

// reconcile classifies a job owned by a re-registering agent: a started
// job the agent lists is reclaimed when it was recovering; a started job it
// does not list is lost. Caller holds registry.mu.
func (js *jobState) reconcile(id string, listed bool, reclaimed, lost []string) ([]string, []string) {
	if !js.started {
		return reclaimed, lost
	}
	if listed {
		if !js.recoverBy.IsZero() {
			js.recoverBy = time.Time{}
			reclaimed = append(reclaimed, id)
		}
		return reclaimed, lost
	}
	js.done = true
	js.doneAt = time.Now()
	js.recoverBy = time.Time{}
	return reclaimed, append(lost, id)
}

// markRecovering moves the jobs of a disconnected static agent from
// running to recovering.
func (r *registry) markRecovering(ctx context.Context, ids []string) {
	for _, id := range ids {
		if _, err := r.st.UpdateJobStatus(ctx, id, []status.Job{status.JobRunning}, status.JobRecovering, store.JobUpdate{}); err != nil {
			r.log.Warn("mark job recovering", "job", id, "err", err)
		}
	}
}

// settleReconnect applies the outcome of a re-registration: reclaimed jobs
// run again, lost ones fail.
func (r *registry) settleReconnect(ctx context.Context, agentID string, reclaimed, lost []string) {
	for _, id := range reclaimed {
		r.log.Info("agent reclaimed its job", "agent", agentID, "job", id)
		if ev := r.fr.ev(); ev != nil {
			if err := ev.JobStarted(ctx, id, agentID, time.Now().UTC()); err != nil {
				r.log.Warn("job reclaimed event", "job", id, "err", err)
			}
		}
	}
	for _, id := range lost {
		r.failLost(ctx, id, fmt.Sprintf("agent lost: %s re-registered without the job (it restarted while running it)", agentID))
	}
}

// expireRecoveries fails recovering jobs whose agent did not come back in
// time.
func (r *registry) expireRecoveries() {
	now := time.Now()
	var expired []string
	r.mu.Lock()
	for id, js := range r.jobs {
		if js.done || js.recoverBy.IsZero() || now.Before(js.recoverBy) {
			continue
		}
		js.done = true
		js.doneAt = now
		js.recoverBy = time.Time{}
		expired = append(expired, id)
	}
	r.mu.Unlock()
	for _, id := range expired {
		// In a cluster the agent may have reconnected to another node,
		// which took the job back (recovering → running): not lost.
		if j, err := r.st.GetJob(r.ctx, id); err == nil && j.Status != status.JobRecovering {
			r.log.Info("job of a disconnected agent is held by another node", "job", id, "status", j.Status)
			continue
		}
		r.failLost(r.ctx, id, fmt.Sprintf("agent disconnected and did not reconnect within the recovery window (%s)", r.cfg.RecoveryWindow))
	}
}

// failLost fails a job whose agent lost it, unless it already ended.
func (r *registry) failLost(ctx context.Context, id, msg string) {
	changed, err := r.st.SetQueueStatus(ctx, id, []string{store.QueueDispatched}, store.QueueFailed)
	if err != nil {
		r.log.Error("fail queue entry", "job", id, "err", err)
		return
	}
	if !changed {
		return
	}
	r.log.Warn("job failed", "job", id, "reason", msg)
	r.fr.finishJob(ctx, id, status.JobFailed, msg)
}
