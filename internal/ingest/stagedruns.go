package ingest

import (
	"context"

	"kici.dev/kici/internal/store"
)

// stagedRuns are the runs of one delivery, checked and defaulted but not
// stored yet: Process stores them with the delivery's outcome in one
// transaction (store.FinishDeliveryWithRuns), so a crash can never leave
// half a run or a run whose delivery still reads "received", and a
// delivery costs one write transaction instead of one per run, context
// and outcome.
type stagedRuns []store.NewRun

// stage prepares run and jobs as the tracker would create them and keeps
// them, with rc when it carries inputs or changed paths, for Process to
// store. Errors are the tracker's PrepareRun errors.
func (p *Processor) stage(b *stagedRuns, run *store.Run, jobs []*store.Job, rc *store.RunContext) error {
	if err := p.tracker.PrepareRun(run, jobs); err != nil {
		return err
	}
	nr := store.NewRun{Run: run, Jobs: jobs}
	if rc != nil && (len(rc.Inputs) > 0 || len(rc.ChangedPaths) > 0) {
		nr.Context = rc
	}
	*b = append(*b, nr)
	return nil
}

// release hands the stored runs to the tracker, which queues their ready
// jobs. A failure is logged: the run stays pending in the store, where the
// tracker's recovery releases it.
func (p *Processor) release(ctx context.Context, deliveryID string, b stagedRuns) {
	for _, nr := range b {
		if err := p.tracker.RunStored(ctx, nr.Run, nr.Jobs); err != nil {
			p.log.Error("ingest: release run", "deliveryId", deliveryID, "runId", nr.Run.ID, "error", err)
		}
	}
}
