package runctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/store"
)

// waitingReason says why run e waits in its workflow concurrency group
// and who holds it: the active runs (when the group is full), else the
// older queued run it waits behind.
func waitingReason(e *store.ConcurrencyEntry, active []string, ahead string) string {
	if len(active) > 0 {
		return fmt.Sprintf("waiting for concurrency group '%s' (max %d), held by run %s", e.Group, e.Max, strings.Join(active, ", "))
	}
	return fmt.Sprintf("waiting for concurrency group '%s' (max %d), queued behind run %s", e.Group, e.Max, ahead)
}

// noteWaiting sets reason as the routing reason of runID's pending jobs
// (those the group keeps from being released), so the run says what it
// waits for; "" clears it once the run is admitted. Only rows whose reason
// differs are written. Failures are logged: the reason is informative.
func (c *Controller) noteWaiting(ctx context.Context, runID, reason string) {
	jobs, err := c.st.ListJobs(ctx, runID)
	if err != nil {
		c.log.Warn("concurrency: list jobs for the waiting reason", "runId", runID, "err", err)
		return
	}
	for _, j := range jobs {
		if j.Status != status.JobPending || j.PendingReason == reason {
			continue
		}
		r := reason
		if _, err := c.st.UpdateJobStatus(ctx, j.ID, []status.Job{status.JobPending}, status.JobPending, store.JobUpdate{PendingReason: &r}); err != nil {
			c.log.Warn("concurrency: record the waiting reason", "jobId", j.ID, "err", err)
		}
	}
}

// noteHolders updates the reasons of the runs of list still waiting after
// a promotion, since the runs holding the group changed.
func (c *Controller) noteHolders(ctx context.Context, list []*store.ConcurrencyEntry, admitted []string) {
	var holders []string
	for _, e := range list {
		if e.Status == store.ConcurrencyActive || slices.Contains(admitted, e.RunID) {
			holders = append(holders, e.RunID)
		}
	}
	ahead := ""
	for _, e := range list {
		if e.Status != store.ConcurrencyQueued || slices.Contains(admitted, e.RunID) {
			continue
		}
		c.noteWaiting(ctx, e.RunID, waitingReason(e, holders, ahead))
		ahead = e.RunID
	}
}
