package storetest

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"kici.dev/kici/internal/store"
)

// ---------------------------------------------------------------- queue

func testQueue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	e1 := &store.QueueEntry{ID: "q1", RunID: "r", JobName: "build", RunsOnLabels: []string{"linux", "docker"},
		ExcludeLabels: []string{"gpu"}, Status: store.QueuePending, CreatedAt: at(0)}
	e2 := &store.QueueEntry{ID: "q2", RunID: "r", JobName: "lint", CreatedAt: at(1)}
	e3 := &store.QueueEntry{ID: "q3", RunID: "r", JobName: "deploy", RunsOnLabels: []string{}, ExcludeLabels: []string{},
		PinnedAgentID: "agent-p", CreatedAt: at(-1)}
	for _, e := range []*store.QueueEntry{e1, e2, e3} {
		must(t, s.Enqueue(ctx, e))
	}
	if e2.Status != store.QueuePending {
		t.Errorf("Enqueue default status %q", e2.Status)
	}
	wantErr(t, "Enqueue duplicate", s.Enqueue(ctx, &store.QueueEntry{ID: "q1", RunID: "x", JobName: "y", CreatedAt: at(5)}), store.ErrConflict)

	all, err := s.ListQueue(ctx, nil)
	must(t, err)
	same(t, "ListQueue all", []*store.QueueEntry{e3, e1, e2}, all)

	// ClaimByID ignores labels and pins; second claim gets nothing.
	deadline := at(10)
	c, err := s.ClaimByID(ctx, "q2", "agent-1", deadline)
	must(t, err)
	want2 := *e2
	want2.Status, want2.AgentID, want2.AckDeadline = store.QueueDispatched, "agent-1", ptime(deadline)
	same(t, "ClaimByID", &want2, c)
	c, err = s.ClaimByID(ctx, "q2", "agent-2", deadline)
	must(t, err)
	if c != nil {
		t.Errorf("second ClaimByID returned %+v", c)
	}
	c, err = s.ClaimByID(ctx, "missing", "agent-2", deadline)
	if err != nil || c != nil {
		t.Errorf("ClaimByID unknown: %v, %v", c, err)
	}

	// One entry by id, in whatever status; an unknown id is not found.
	got, err := s.GetQueueEntry(ctx, "q2")
	must(t, err)
	same(t, "GetQueueEntry of a claimed entry", &want2, got)
	got, err = s.GetQueueEntry(ctx, "q1")
	must(t, err)
	same(t, "GetQueueEntry of a pending entry", e1, got)
	_, err = s.GetQueueEntry(ctx, "missing")
	wantErr(t, "GetQueueEntry unknown", err, store.ErrNotFound)

	// Ack: only the owning agent, only while dispatched.
	wantErr(t, "Ack by another agent", s.AckQueueEntry(ctx, "q2", "agent-2"), store.ErrNotFound)
	must(t, s.AckQueueEntry(ctx, "q2", "agent-1"))
	list, err := s.ListQueue(ctx, []string{store.QueueDispatched})
	must(t, err)
	want2.AckDeadline = nil
	same(t, "after ack", []*store.QueueEntry{&want2}, list)
	wantErr(t, "Ack pending entry", s.AckQueueEntry(ctx, "q1", "agent-1"), store.ErrNotFound)

	// Requeue counts attempts and clears the claim.
	n, ok, err := s.RequeueEntry(ctx, "q2")
	must(t, err)
	if !ok || n != 1 {
		t.Errorf("RequeueEntry = %d, %v", n, ok)
	}
	n, ok, err = s.RequeueEntry(ctx, "q2")
	must(t, err)
	if ok || n != 0 {
		t.Errorf("RequeueEntry of a pending entry = %d, %v", n, ok)
	}
	_, _, err = s.RequeueEntry(ctx, "missing")
	must(t, err)
	if _, err := s.ClaimByID(ctx, "q2", "agent-3", deadline); err != nil {
		t.Fatal(err)
	}
	n, ok, err = s.RequeueEntry(ctx, "q2")
	must(t, err)
	if !ok || n != 2 {
		t.Errorf("second RequeueEntry = %d, %v", n, ok)
	}
	list, err = s.ListQueue(ctx, []string{store.QueuePending})
	must(t, err)
	want2 = *e2
	want2.Attempts = 2
	same(t, "pending after requeues", []*store.QueueEntry{e3, e1, &want2}, list)

	// Pin / unpin a pending entry.
	must(t, s.PinQueueEntry(ctx, "q1", "agent-9"))
	c, err = s.ClaimNext(ctx, "agent-1", []string{"linux", "docker"}, deadline)
	must(t, err)
	if c == nil || c.ID != "q2" {
		t.Errorf("ClaimNext with q1 pinned elsewhere = %+v, want q2", c)
	}
	must(t, s.PinQueueEntry(ctx, "q1", ""))
	wantErr(t, "Pin dispatched entry", s.PinQueueEntry(ctx, "q2", "x"), store.ErrNotFound)
	wantErr(t, "Pin unknown entry", s.PinQueueEntry(ctx, "missing", "x"), store.ErrNotFound)

	// SetQueueStatus is conditional; nil from = any non-terminal status.
	ok, err = s.SetQueueStatus(ctx, "q2", []string{store.QueuePending}, store.QueueCompleted)
	wantChanged(t, "dispatched→completed with from=[pending]", ok, err, false)
	ok, err = s.SetQueueStatus(ctx, "q2", []string{store.QueueDispatched}, store.QueueCompleted)
	wantChanged(t, "dispatched→completed", ok, err, true)
	ok, err = s.SetQueueStatus(ctx, "q2", nil, store.QueuePending)
	wantChanged(t, "completed→pending (nil from)", ok, err, false)
	ok, err = s.SetQueueStatus(ctx, "q3", nil, store.QueueExpired)
	wantChanged(t, "pending→expired (nil from)", ok, err, true)
	ok, err = s.SetQueueStatus(ctx, "missing", nil, store.QueueExpired)
	wantChanged(t, "unknown entry", ok, err, false)

	list, err = s.ListQueue(ctx, []string{store.QueueCompleted, store.QueueExpired})
	must(t, err)
	same(t, "ListQueue terminal", []string{"q3", "q2"}, ids(list, func(x *store.QueueEntry) string { return x.ID }))
	list, err = s.ListQueue(ctx, []string{store.QueueFailed})
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListQueue failed: %d", len(list))
	}
}

func testClaimNextMatching(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	dl := at(30)
	claim := func(agent string, labels ...string) string {
		t.Helper()
		e, err := s.ClaimNext(ctx, agent, labels, dl)
		must(t, err)
		if e == nil {
			return ""
		}
		if e.Status != store.QueueDispatched || e.AgentID != agent || e.AckDeadline == nil || !e.AckDeadline.Equal(dl) {
			t.Errorf("claimed entry %s: status %q agent %q deadline %v", e.ID, e.Status, e.AgentID, e.AckDeadline)
		}
		return e.ID
	}
	if id := claim("a"); id != "" {
		t.Fatalf("claim from empty queue = %q", id)
	}
	entries := []*store.QueueEntry{
		{ID: "needs-linux-docker", RunsOnLabels: []string{"linux", "docker"}, CreatedAt: at(0)},
		{ID: "needs-linux-not-gpu", RunsOnLabels: []string{"linux"}, ExcludeLabels: []string{"gpu", "arm64"}, CreatedAt: at(1)},
		{ID: "pinned-to-p", RunsOnLabels: []string{"linux"}, PinnedAgentID: "p", CreatedAt: at(-5)},
		{ID: "anything", CreatedAt: at(3)},
		{ID: "anything-empty", RunsOnLabels: []string{}, ExcludeLabels: []string{}, CreatedAt: at(3)},
	}
	for _, e := range entries {
		e.RunID, e.JobName = "r", e.ID
		must(t, s.Enqueue(ctx, e))
	}
	// Agent with only "docker": nothing needing linux; oldest labelless first,
	// equal created_at in enqueue order.
	if id := claim("x", "docker", "gpu"); id != "anything" {
		t.Errorf("docker,gpu agent got %q, want anything", id)
	}
	if id := claim("x", "docker", "gpu"); id != "anything-empty" {
		t.Errorf("docker,gpu agent got %q, want anything-empty", id)
	}
	if id := claim("x", "docker", "gpu"); id != "" {
		t.Errorf("docker,gpu agent got %q, want nothing", id)
	}
	// Exclude: linux+gpu may take needs-linux-docker only with docker.
	if id := claim("y", "linux", "gpu"); id != "" {
		t.Errorf("linux,gpu agent got %q, want nothing", id)
	}
	// Pin: p takes its pinned entry (oldest) first; others never do.
	if id := claim("q", "linux", "docker", "gpu"); id != "needs-linux-docker" {
		t.Errorf("q agent got %q, want needs-linux-docker", id)
	}
	if id := claim("q", "linux", "docker", "x86_64"); id != "needs-linux-not-gpu" {
		t.Errorf("q agent got %q, want needs-linux-not-gpu", id)
	}
	if id := claim("q", "linux", "docker"); id != "" {
		t.Errorf("q agent got %q, want nothing (pinned to p)", id)
	}
	if id := claim("p", "linux"); id != "pinned-to-p" {
		t.Errorf("p agent got %q, want pinned-to-p", id)
	}
	// A pinned agent still needs the labels.
	must(t, s.Enqueue(ctx, &store.QueueEntry{ID: "pinned-needs-mac", RunsOnLabels: []string{"macos"}, PinnedAgentID: "p", CreatedAt: at(9)}))
	if id := claim("p", "linux"); id != "" {
		t.Errorf("p agent without macos got %q", id)
	}
	if id := claim("p", "macos", "linux"); id != "pinned-needs-mac" {
		t.Errorf("p agent with macos got %q", id)
	}
	// Oldest first across many.
	for i := 5; i >= 1; i-- {
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("o%d", i), RunsOnLabels: []string{"o"}, CreatedAt: at(100 + i)}))
	}
	var order []string
	for id := claim("z", "o"); id != ""; id = claim("z", "o") {
		order = append(order, id)
	}
	same(t, "claim order", []string{"o1", "o2", "o3", "o4", "o5"}, order)
	pending, err := s.ListQueue(ctx, []string{store.QueuePending})
	must(t, err)
	if len(pending) != 0 {
		t.Errorf("left pending: %v", ids(pending, func(x *store.QueueEntry) string { return x.ID }))
	}
}

func testClaimNextConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const workers, perWorker = 20, 10
	for i := 0; i < workers*perWorker; i++ {
		labels := []string{"linux"}
		if i%3 == 0 {
			labels = nil
		}
		must(t, s.Enqueue(ctx, &store.QueueEntry{ID: fmt.Sprintf("c%03d", i), RunID: "r", JobName: "j",
			RunsOnLabels: labels, CreatedAt: at(i % 7)}))
	}
	var mu sync.Mutex
	claims := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		agent := fmt.Sprintf("agent-%02d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, err := s.ClaimNext(ctx, agent, []string{"linux", "x64"}, at(60))
				if err != nil {
					errs <- err
					return
				}
				if e == nil {
					return
				}
				if e.AgentID != agent {
					errs <- fmt.Errorf("entry %s claimed for %s reports agent %s", e.ID, agent, e.AgentID)
					return
				}
				mu.Lock()
				claims[e.ID] = append(claims[e.ID], agent)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claims) != workers*perWorker {
		t.Errorf("claimed %d distinct entries, want %d", len(claims), workers*perWorker)
	}
	var dups []string
	for id, agents := range claims {
		if len(agents) != 1 {
			dups = append(dups, fmt.Sprintf("%s by %v", id, agents))
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Errorf("entries claimed more than once: %v", dups)
	}
	list, err := s.ListQueue(ctx, []string{store.QueueDispatched})
	must(t, err)
	if len(list) != workers*perWorker {
		t.Errorf("%d dispatched rows, want %d", len(list), workers*perWorker)
	}
	for _, e := range list {
		if a := claims[e.ID]; len(a) != 1 || a[0] != e.AgentID {
			t.Errorf("row %s agent %q, claims %v", e.ID, e.AgentID, a)
		}
	}
}
