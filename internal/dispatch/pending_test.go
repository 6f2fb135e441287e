package dispatch

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/store"
)

// entryAt is a pending entry created at minute m with runsOn labels.
func entryAt(id string, m int, runsOn ...string) *store.QueueEntry {
	return &store.QueueEntry{ID: id, RunID: "r", JobName: id, RunsOnLabels: runsOn, Status: store.QueuePending,
		CreatedAt: time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC)}
}

// fitsLabels is pendingIndex.next's predicate for an untainted agent.
func fitsLabels(labels ...string) func(runsOn, exclude []string) bool {
	return func(runsOn, exclude []string) bool { return agentFits(labels, nil, nil, runsOn, exclude) }
}

func nextID(x *pendingIndex, agent string, labels ...string) string {
	if e := x.next(agent, fitsLabels(labels...)); e != nil {
		return e.ID
	}
	return ""
}

// An agent is offered the oldest entry among the label sets it fits,
// whatever order they were enqueued in, and a claimed or cancelled entry
// is offered to nobody.
func TestPendingIndexOffersOldestFittingEntry(t *testing.T) {
	x := newPendingIndex()
	x.put(entryAt("linux-late", 5, "linux"))
	x.put(entryAt("gpu", 1, "linux", "gpu"))
	x.put(entryAt("linux-early", 2, "linux"))
	x.put(entryAt("any", 3))

	if got := nextID(x, "a", "linux"); got != "linux-early" {
		t.Fatalf("linux agent offered %q, want linux-early (gpu needs a label it lacks)", got)
	}
	if got := nextID(x, "a", "linux", "gpu", "big"); got != "gpu" {
		t.Fatalf("agent with a superset of labels offered %q, want the oldest entry gpu", got)
	}
	if got := nextID(x, "a", "windows"); got != "any" {
		t.Fatalf("windows agent offered %q, want the entry asking for no label", got)
	}

	x.remove("linux-early") // claimed
	x.remove("any")         // cancelled
	if got := nextID(x, "a", "linux"); got != "linux-late" {
		t.Fatalf("after claim and cancel the linux agent is offered %q, want linux-late", got)
	}
	if got := nextID(x, "a", "windows"); got != "" {
		t.Fatalf("windows agent offered %q after the only entry it fits was cancelled", got)
	}
	if x.len() != 2 {
		t.Fatalf("index holds %d entries, want 2", x.len())
	}
}

// Exclude labels keep an entry from an agent carrying them; a requeued
// entry (put again) takes back its place by age.
func TestPendingIndexExcludeAndRequeue(t *testing.T) {
	x := newPendingIndex()
	e := entryAt("not-on-slow", 1, "linux")
	e.ExcludeLabels = []string{"slow"}
	x.put(e)
	x.put(entryAt("later", 2, "linux"))
	if got := nextID(x, "a", "linux", "slow"); got != "later" {
		t.Fatalf("slow agent offered %q, want later (not-on-slow excludes it)", got)
	}
	x.remove("not-on-slow")
	x.put(e) // back in the queue after a failed dispatch
	if got := nextID(x, "a", "linux"); got != "not-on-slow" {
		t.Fatalf("after requeue offered %q, want the older entry not-on-slow", got)
	}
}

// A pinned entry is offered only to its agent, before anything else; once
// unpinned it rejoins its label set.
func TestPendingIndexPinnedEntries(t *testing.T) {
	x := newPendingIndex()
	x.put(entryAt("old", 1, "linux"))
	x.put(entryAt("bound", 2, "linux"))
	x.pin("bound", "spawned-1")
	if got := nextID(x, "other", "linux"); got != "old" {
		t.Fatalf("other agent offered %q, want old (bound is pinned elsewhere)", got)
	}
	if got := nextID(x, "spawned-1", "linux"); got != "bound" {
		t.Fatalf("pinned agent offered %q, want its bound entry first", got)
	}
	if p := x.pinnedTo("spawned-1"); len(p) != 1 || p[0].ID != "bound" {
		t.Fatalf("pinnedTo = %v", p)
	}
	x.remove("old")
	if got := nextID(x, "other", "linux"); got != "" {
		t.Fatalf("other agent offered %q, want nothing", got)
	}
	x.pin("bound", "")
	if got := nextID(x, "other", "linux"); got != "bound" {
		t.Fatalf("after unpin offered %q, want bound", got)
	}
	if len(x.allPinned()) != 0 {
		t.Fatal("entry still listed as pinned after unpin")
	}
}

// A resync adds what the store has and the index lacks, drops what the
// store no longer has pending, but neither revives an entry claimed here
// after the store was read nor drops one enqueued after it.
func TestPendingIndexResync(t *testing.T) {
	x := newPendingIndex()
	x.put(entryAt("claimed-elsewhere", 1, "linux"))
	x.put(entryAt("kept", 2, "linux"))
	x.put(entryAt("claimed-here", 3, "linux"))
	since := x.mark()
	storeRead := []*store.QueueEntry{entryAt("kept", 2, "linux"), entryAt("claimed-here", 3, "linux"),
		entryAt("other-node", 0, "linux")}
	x.remove("claimed-here")                    // claimed between the read and the merge
	x.put(entryAt("enqueued-late", 9, "linux")) // enqueued after the read
	added, dropped := x.resync(storeRead, since)
	if added != 1 || dropped != 1 {
		t.Fatalf("resync added %d dropped %d, want 1 and 1", added, dropped)
	}
	var order []string
	for e := x.next("a", fitsLabels("linux")); e != nil; e = x.next("a", fitsLabels("linux")) {
		order = append(order, e.ID)
		x.remove(e.ID)
	}
	if fmt.Sprint(order) != "[other-node kept enqueued-late]" {
		t.Fatalf("after resync the agent is offered %v", order)
	}
}

// A restarted dispatcher rebuilds its index from the store at Start: the
// jobs its predecessor left queued go to an agent that connects, oldest
// first, and a job in a label set the agent cannot serve stays queued.
func TestPendingIndexRebuiltAtStart(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	first := h.job("linux")
	h.enqueue(first)
	gpu := h.job("linux", "gpu")
	h.enqueue(gpu)
	second := h.job("linux")
	h.enqueue(second)

	// A second dispatcher on the same store stands for the restarted
	// process: it has never seen these jobs enqueued.
	h.d.Shutdown(context.Background())
	h2 := h.restart(Config{}, nil)
	if n := h2.d.queue.pending.len(); n != 0 {
		t.Fatalf("index holds %d entries before Start", n)
	}
	h2.d.Start(context.Background())
	if n := h2.d.queue.pending.len(); n != 3 {
		t.Fatalf("index holds %d entries after Start, want the 3 queued jobs", n)
	}
	a := h2.agent("a1", h2.staticToken(), "linux")
	if jd := a.dispatch(); jd.JobID != first.ID {
		t.Fatalf("first dispatch %s, want the oldest queued job %s", jd.JobID, first.ID)
	}
	if e := h2.entry(gpu.ID); e.Status != store.QueuePending {
		t.Fatalf("gpu job entry %s, want still pending", e.Status)
	}
	if e, ok := h2.d.queue.pending.get(second.ID); !ok || e.ID != second.ID {
		t.Fatal("the second linux job left the index although the agent's slot was taken")
	}
}

// BenchmarkPendingNext measures finding an agent's next job with many
// jobs parked in label sets it cannot serve: the cost stays flat as the
// parked count grows (one candidate per label set, not per job).
func BenchmarkPendingNext(b *testing.B) {
	for _, parked := range []int{0, 100, 2000, 20000} {
		b.Run(fmt.Sprintf("parked=%d", parked), func(b *testing.B) {
			x := newPendingIndex()
			for i := 0; i < parked; i++ {
				x.put(entryAt(fmt.Sprintf("p%d", i), i%60, "bench-nobody", fmt.Sprintf("set-%d", i%8)))
			}
			x.put(entryAt("fits", 30, "linux"))
			fits := fitsLabels("kici:os:linux", "linux", "docker")
			b.ResetTimer()
			for b.Loop() {
				if e := x.next("agent", fits); e == nil || e.ID != "fits" {
					b.Fatal("fitting entry not found")
				}
			}
		})
	}
}

// restart returns a harness with a new dispatcher on h's store, as after
// an orchestrator restart.
func (h *harness) restart(cfg Config, sp Spawner) *harness {
	h.t.Helper()
	h2 := &harness{t: h.t, st: h.st, aa: h.aa, logs: &logSink{}}
	h2.ev = newEvents(h.st)
	h2.d = New(cfg, h.st, h.aa, h2.logs, sp, nil, Deps{Events: h2.ev})
	srv := httptest.NewServer(h2.d)
	h2.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h2.d.Shutdown(ctx)
		srv.Close()
	})
	return h2
}
