package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testRetention covers RetentionStore: each kind deletes only what expired
// (terminal, older than the cutoff), in batches of at most limit, keeps
// runs whose attestations are still retained, takes a deleted run's jobs,
// steps and queue entries with it, and refuses an unknown kind.
func testRetention(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	cut := at(1000)
	// Runs: three old terminal ones, one recent, one old but still running,
	// one old with a recent attestation.
	mkRun := func(id string, completed int, final status.Run) {
		must(t, s.CreateRun(ctx, fullRun(id, at(0)), []*store.Job{{ID: id + "-j", JobName: "j", BaseJobName: "j", Status: status.JobQueued, CreatedAt: at(0)}}))
		must(t, s.UpsertStep(ctx, &store.Step{JobID: id + "-j", RunID: id, StepIndex: 0, StepName: "s", Status: status.StepSuccess}))
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: id + "-j", RunID: id, JobName: "j", Status: store.QueuePending, CreatedAt: at(0)}))
		if final != status.RunRunning {
			_, err := s.UpdateRunStatus(ctx, id, nil, final, store.RunUpdate{CompletedAt: ptime(at(completed))})
			must(t, err)
		}
	}
	mkRun("old-1", 10, status.RunSuccess)
	mkRun("old-2", 20, status.RunFailed)
	mkRun("old-3", 30, status.RunCancelled)
	mkRun("recent", 2000, status.RunSuccess)
	mkRun("live", 0, status.RunRunning)
	mkRun("attested", 40, status.RunSuccess)
	must(t, s.PutAttestation(ctx, &store.Attestation{ID: "att-new", RunID: "attested", JobID: "attested-j", SubjectName: "a",
		SubjectDigest: "sha256:" + strings.Repeat("ab", 32), Kid: "k", Bundle: json.RawMessage(`{}`), CreatedAt: at(5000)}))

	n, ids, err := s.SweepExpired(ctx, store.SweepRuns, cut, at(3000), 2)
	must(t, err)
	if n != 2 || len(ids) != 2 {
		t.Fatalf("first batch deleted %d runs %v, want 2 (the limit)", n, ids)
	}
	n2, ids2, err := s.SweepExpired(ctx, store.SweepRuns, cut, at(3000), 2)
	must(t, err)
	if n2 != 1 {
		t.Fatalf("second batch deleted %d runs %v, want the last expired one", n2, ids2)
	}
	gone := append(ids, ids2...)
	slices.Sort(gone)
	same(t, "swept runs", []string{"old-1", "old-2", "old-3"}, gone)
	if n, _, err := s.SweepExpired(ctx, store.SweepRuns, cut, at(3000), 2); err != nil || n != 0 {
		t.Fatalf("third batch: %d %v, want nothing left", n, err)
	}
	for _, id := range []string{"recent", "live", "attested"} {
		if _, err := s.GetRun(ctx, id); err != nil {
			t.Errorf("run %s was swept: %v", id, err)
		}
	}
	for _, id := range gone {
		if _, err := s.GetRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("run %s still there: %v", id, err)
		}
		if _, err := s.GetJob(ctx, id+"-j"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job of %s still there: %v", id, err)
		}
	}
	q, err := s.ListQueue(ctx, nil)
	must(t, err)
	var left []string
	for _, e := range q {
		left = append(left, e.ID)
	}
	slices.Sort(left)
	same(t, "queue entries left", []string{"attested-j", "live-j", "recent-j"}, left)

	// Provenance: the attestation is newer than the cutoff, then older.
	if n, _, err := s.SweepExpired(ctx, store.SweepProvenance, at(4000), at(0), 0); err != nil || n != 0 {
		t.Fatalf("provenance sweep before expiry: %d %v", n, err)
	}
	if n, _, err := s.SweepExpired(ctx, store.SweepProvenance, at(6000), at(0), 0); err != nil || n != 1 {
		t.Fatalf("provenance sweep after expiry: %d %v", n, err)
	}

	// Dispatch queue: only terminal entries older than the cutoff.
	must(t, s.Enqueue(ctx, &store.QueueEntry{ID: "q-done", RunID: "recent", JobName: "j", Status: store.QueuePending, CreatedAt: at(1)}))
	if _, err := s.SetQueueStatus(ctx, "q-done", nil, store.QueueCompleted); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.SweepExpired(ctx, store.SweepQueue, cut, at(0), 0); err != nil || n != 1 {
		t.Fatalf("queue sweep: %d %v, want the completed entry only", n, err)
	}
	q, _ = s.ListQueue(ctx, nil)
	if len(q) != 3 {
		t.Fatalf("queue after sweep has %d entries, want the 3 pending ones", len(q))
	}

	// Deliveries: processed ones go, one still received stays.
	must(t, s.InsertDelivery(ctx, &store.Delivery{ID: "d-done", SourceID: "src", Event: "push", Payload: []byte(`{}`), Status: store.DeliveryReceived, ReceivedAt: at(1)}))
	must(t, s.InsertDelivery(ctx, &store.Delivery{ID: "d-waiting", SourceID: "src", Event: "push", Payload: []byte(`{}`), Status: store.DeliveryReceived, ReceivedAt: at(1)}))
	must(t, s.FinishDelivery(ctx, "d-done", store.DeliveryProcessed, "", nil))
	if n, _, err := s.SweepExpired(ctx, store.SweepDeliveries, cut, at(0), 0); err != nil || n < 1 {
		t.Fatalf("delivery sweep: %d %v", n, err)
	}
	if _, err := s.GetDelivery(ctx, "d-done"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("processed delivery still there: %v", err)
	}
	if d, err := s.GetDelivery(ctx, "d-waiting"); err != nil || d.Status != store.DeliveryReceived {
		t.Errorf("an unprocessed delivery was swept: %v", err)
	}

	// Audit: entries older than the cutoff.
	must(t, s.AppendAccessLog(ctx, &store.AccessLogEntry{At: at(1), Action: "token.create"}))
	must(t, s.AppendAccessLog(ctx, &store.AccessLogEntry{At: at(2000), Action: "token.revoke"}))
	if n, _, err := s.SweepExpired(ctx, store.SweepAudit, cut, at(0), 0); err != nil || n != 1 {
		t.Fatalf("audit sweep: %d %v, want 1", n, err)
	}

	// Held runs: a decided hold goes, a pending one stays.
	for _, id := range []string{"h-decided", "h-pending"} {
		h := &store.HeldRun{ID: id, OrgID: "acme", RunID: "recent", HoldType: hold.Reviewer, QueueType: hold.QueueContext,
			HoldScope: hold.ScopeWorkflow, Reason: "r", ExpiresAt: at(10)}
		if _, err := s.CreateHeldRun(ctx, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DecideHeldRun(ctx, "h-decided", nil, nil, hold.Rejected, "bob", "no", at(20)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.SweepExpired(ctx, store.SweepHeldRuns, cut, at(0), 0); err != nil || n != 1 {
		t.Fatalf("held-run sweep: %d %v, want the decided hold", n, err)
	}
	if _, err := s.GetHeldRun(ctx, "h-pending"); err != nil {
		t.Errorf("pending hold swept: %v", err)
	}

	if _, _, err := s.SweepExpired(ctx, "everything", cut, at(0), 0); err == nil {
		t.Error("unknown kind accepted")
	}
}
