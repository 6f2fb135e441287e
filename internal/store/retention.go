package store

import (
	"context"
	"time"
)

// Retention kinds: what one sweep deletes (KiCI retention variables, see
// internal/retention).
const (
	// SweepRuns: terminal runs that completed before the cutoff, with their
	// jobs, steps, outputs and queue entries. A run that still has an
	// attestation newer than the provenance cutoff is kept (its
	// attestations would go with it).
	SweepRuns = "runs"
	// SweepDeliveries: deliveries no longer "received" (processed or
	// failed), event-log rows and rejected deliveries received before the
	// cutoff.
	SweepDeliveries = "deliveries"
	// SweepAudit: access-log rows older than the cutoff.
	SweepAudit = "audit"
	// SweepProvenance: attestation bundles created before the cutoff.
	SweepProvenance = "provenance"
	// SweepHeldRuns: holds that were decided or expired (not pending)
	// before the cutoff, with their contexts and approvals.
	SweepHeldRuns = "held_runs"
	// SweepQueue: dispatch-queue entries in a terminal status created
	// before the cutoff.
	SweepQueue = "dispatch_queue"
)

// RetentionStore deletes expired history in bounded batches. Each call
// deletes at most limit rows of its kind (limit ≤ 0 means 500) in one short
// statement, so a sweep never holds a lock that ingest or dispatch waits
// on for long; the caller repeats while a batch comes back full.
type RetentionStore interface {
	// SweepExpired deletes up to limit expired rows of kind (a Sweep*
	// constant) older than before and returns how many it deleted. For
	// SweepRuns, keepAttestedAfter protects runs holding an attestation
	// created at or after it, and the ids of the deleted runs are returned
	// (their step logs are removed by the caller). An unknown kind is an
	// error.
	SweepExpired(ctx context.Context, kind string, before, keepAttestedAfter time.Time, limit int) (deleted int, runIDs []string, err error)
}

// DefaultSweepBatch is the batch size of SweepExpired when limit ≤ 0.
const DefaultSweepBatch = 500
