package runs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// releaseCounter counts the store calls a job's release can make.
type releaseCounter struct {
	store.Store
	mu                      sync.Mutex
	releases, moves, queues int
}

func (c *releaseCounter) ReleaseJob(ctx context.Context, id string, e *store.QueueEntry) (*store.Job, bool, error) {
	c.mu.Lock()
	c.releases++
	c.mu.Unlock()
	return c.Store.ReleaseJob(ctx, id, e)
}

func (c *releaseCounter) MoveJob(ctx context.Context, id string, from []status.Job, to status.Job, u store.JobUpdate) (*store.Job, error) {
	c.mu.Lock()
	c.moves++
	c.mu.Unlock()
	return c.Store.MoveJob(ctx, id, from, to, u)
}

func (c *releaseCounter) Enqueue(ctx context.Context, e *store.QueueEntry) error {
	c.mu.Lock()
	c.queues++
	c.mu.Unlock()
	return c.Store.Enqueue(ctx, e)
}

// entryRecorder is an EntryQueuer that records what it is handed, and
// calls is the order the subscribers were called in.
type entryRecorder struct {
	NopSubscriber
	name   string
	calls  *[]string
	queued []*store.QueueEntry
	stored []bool
	fail   bool
}

func (r *entryRecorder) QueueEntry(job *store.Job) *store.QueueEntry {
	return &store.QueueEntry{ID: job.ID, RunID: job.RunID, JobName: job.JobName, RunsOnLabels: job.RunsOnLabels, CreatedAt: time.Now().UTC()}
}

func (r *entryRecorder) JobQueued(_ context.Context, _ *store.Job, e *store.QueueEntry, stored bool) error {
	*r.calls = append(*r.calls, r.name+":queued")
	r.queued, r.stored = append(r.queued, e), append(r.stored, stored)
	if r.fail {
		return errors.New("queue down")
	}
	return nil
}

// readyRecorder records JobReady calls in calls.
type readyRecorder struct {
	NopSubscriber
	name  string
	calls *[]string
}

func (r readyRecorder) JobReady(context.Context, *store.Job) error {
	*r.calls = append(*r.calls, r.name+":ready")
	return nil
}

// With a subscriber that queues entries, a released job is moved and
// queued in one store call, that subscriber is handed the stored entry in
// its turn and the others JobReady in theirs; a job released while an
// entry was there already is handed on as not stored.
func TestReleaseStoresTheQueueEntryWithTheJob(t *testing.T) {
	st := teststore.SQLite(t)
	rc := &releaseCounter{Store: st}
	var calls []string
	q := &entryRecorder{name: "queue", calls: &calls}
	tr := NewTracker(rc, nil, nil, TrackerDeps{})
	tr.Subscribe(readyRecorder{name: "before", calls: &calls}, q, readyRecorder{name: "after", calls: &calls})
	f := &fixture{t: t, st: st, tr: tr, ctx: context.Background()}

	_, ids := f.createRun(js("build"), js("test", need("build")))
	f.wantStatus(ids, map[string]status.Job{"build": status.JobQueued, "test": status.JobPending})
	if rc.releases != 1 || rc.moves != 0 || rc.queues != 0 {
		t.Fatalf("store calls: releases %d, moves %d, enqueues %d; want one release and nothing else", rc.releases, rc.moves, rc.queues)
	}
	if len(q.queued) != 1 || q.queued[0].ID != ids["build"] || !q.stored[0] {
		t.Fatalf("entries handed over %+v stored %v; want build's, stored", q.queued, q.stored)
	}
	if e, err := st.GetQueueEntry(f.ctx, ids["build"]); err != nil || e.Status != store.QueuePending {
		t.Fatalf("build's queue entry = %+v, %v; want pending", e, err)
	}
	if want := []string{"before:ready", "queue:queued", "after:ready"}; !slices.Equal(calls, want) {
		t.Fatalf("subscriber calls %v, want %v", calls, want)
	}

	// An entry for test is there already (a recovery queued it): test
	// still moves, its entry is handed on as not stored.
	if err := st.Enqueue(f.ctx, &store.QueueEntry{ID: ids["test"], RunID: "x", JobName: "test"}); err != nil {
		t.Fatal(err)
	}
	calls = nil
	q.fail = true // and a failing queue stops the later subscribers
	f.start(ids["build"], t0)
	f.finish(ids["build"], status.JobSuccess, t0.Add(time.Second))
	f.wantStatus(ids, map[string]status.Job{"test": status.JobQueued})
	if len(q.stored) != 2 || q.stored[1] {
		t.Fatalf("stored flags %v; want the second release reported as not stored", q.stored)
	}
	if want := []string{"before:ready", "queue:queued"}; !slices.Equal(calls, want) {
		t.Fatalf("subscriber calls %v, want %v (none after the failing one)", calls, want)
	}
}
