package dispatch

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"kici.dev/kici/internal/store"
)

// pendingIndex is the dispatcher's in-memory index of the pending queue
// entries, so that routing never lists or scans the queue: entries are
// grouped by label set (routeKey: the same runsOn and exclude labels get
// the same answer from every agent and from the spawner), oldest first
// within a set, and entries pinned to one agent are kept apart by that
// agent's id. An agent with a free slot looks only at its pinned entries
// and at the heads of the label sets it fits, so finding its next job
// costs O(label sets), however many jobs are parked.
//
// The index is a cache of candidates, never the authority: every claim
// still goes through the store's atomic ClaimByID, and an entry the store
// no longer has pending is dropped when its claim finds nothing. It is
// maintained on every queue transition the dispatcher makes (enqueue,
// claim, requeue, pin, cancel, expiry), loaded from the store at Start,
// and merged with the store now and then (resync) for entries another
// orchestrator node enqueued.
//
// Its mutex is a leaf: nothing else is locked while it is held.
type pendingIndex struct {
	mu     sync.Mutex
	sets   map[string]*labelSet
	items  map[string]*pendingItem
	pinned map[string]map[string]*pendingItem // agent id → job id → entry
	// clock orders arrivals (ties of CreatedAt) and tells a resync which
	// changes happened after its store read began.
	clock uint64
	// gone records when entries left the index, so a resync whose read
	// began before does not bring them back; pruned by each resync.
	gone map[string]uint64
}

// pendingItem is one pending entry in the index.
type pendingItem struct {
	e     store.QueueEntry
	set   *labelSet // nil while pinned
	order uint64
	pos   int // position in set.heap
}

// labelSet is the pending entries of one route key, oldest first.
type labelSet struct {
	key             string
	runsOn, exclude []string
	heap            itemHeap
	// synced is the pending reason every entry of the set was last brought
	// in line with (redrive), so an unchanged reason costs no walk.
	synced string
}

func newPendingIndex() *pendingIndex {
	return &pendingIndex{sets: map[string]*labelSet{}, items: map[string]*pendingItem{},
		pinned: map[string]map[string]*pendingItem{}, gone: map[string]uint64{}}
}

// put adds e (a pending entry) or replaces the entry with its id.
func (x *pendingIndex) put(e *store.QueueEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.putLocked(e)
}

func (x *pendingIndex) putLocked(e *store.QueueEntry) {
	x.removeLocked(e.ID)
	delete(x.gone, e.ID)
	x.clock++
	it := &pendingItem{e: *e, order: x.clock}
	it.e.RunsOnLabels = slices.Clone(e.RunsOnLabels)
	it.e.ExcludeLabels = slices.Clone(e.ExcludeLabels)
	x.items[e.ID] = it
	x.place(it)
}

// place files it under its pinned agent or its label set.
func (x *pendingIndex) place(it *pendingItem) {
	if a := it.e.PinnedAgentID; a != "" {
		m := x.pinned[a]
		if m == nil {
			m = map[string]*pendingItem{}
			x.pinned[a] = m
		}
		m[it.e.ID] = it
		return
	}
	key := routeKey(&it.e)
	s := x.sets[key]
	if s == nil {
		s = &labelSet{key: key, runsOn: it.e.RunsOnLabels, exclude: it.e.ExcludeLabels}
		x.sets[key] = s
	}
	it.set = s
	s.synced = "" // the newcomer's reason is not known to be in line
	heap.Push(&s.heap, it)
}

// unplace takes it out of its pinned agent or label set.
func (x *pendingIndex) unplace(it *pendingItem) {
	if it.set != nil {
		heap.Remove(&it.set.heap, it.pos)
		if it.set.heap.Len() == 0 {
			delete(x.sets, it.set.key)
		}
		it.set = nil
		return
	}
	a := it.e.PinnedAgentID
	delete(x.pinned[a], it.e.ID)
	if len(x.pinned[a]) == 0 {
		delete(x.pinned, a)
	}
}

// remove drops the entry with id (claimed, cancelled, expired, failed);
// it reports whether it was indexed.
func (x *pendingIndex) remove(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.removeLocked(id)
}

func (x *pendingIndex) removeLocked(id string) bool {
	it := x.items[id]
	if it == nil {
		return false
	}
	x.unplace(it)
	delete(x.items, id)
	x.clock++
	x.gone[id] = x.clock
	return true
}

// pin sets (or clears with "") the pinned agent of an indexed entry.
func (x *pendingIndex) pin(id, agentID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	it := x.items[id]
	if it == nil || it.e.PinnedAgentID == agentID {
		return
	}
	x.unplace(it)
	it.e.PinnedAgentID = agentID
	x.place(it)
}

// get returns a copy of the indexed entry with id.
func (x *pendingIndex) get(id string) (*store.QueueEntry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if it := x.items[id]; it != nil {
		return it.copy(), true
	}
	return nil, false
}

// has reports whether an entry with id is indexed.
func (x *pendingIndex) has(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.items[id] != nil
}

func (it *pendingItem) copy() *store.QueueEntry {
	e := it.e
	e.RunsOnLabels = slices.Clone(it.e.RunsOnLabels)
	e.ExcludeLabels = slices.Clone(it.e.ExcludeLabels)
	return &e
}

// len is the number of indexed entries.
func (x *pendingIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.items)
}

// next returns the entry an agent should claim next: the oldest entry
// pinned to agentID, else the oldest head of the label sets fits accepts
// (fits is called once per label set, with the index locked, so it must
// not lock the index). nil when nothing fits.
func (x *pendingIndex) next(agentID string, fits func(runsOn, exclude []string) bool) *store.QueueEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best *pendingItem
	for _, it := range x.pinned[agentID] {
		if best == nil || it.before(best) {
			best = it
		}
	}
	if best != nil {
		return best.copy()
	}
	for _, s := range x.sets {
		head := s.heap[0]
		if (best == nil || head.before(best)) && fits(s.runsOn, s.exclude) {
			best = head
		}
	}
	if best == nil {
		return nil
	}
	return best.copy()
}

// pinnedTo returns the entries pinned to agentID, oldest first.
func (x *pendingIndex) pinnedTo(agentID string) []*store.QueueEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	return sortedCopies(x.pinned[agentID])
}

// allPinned returns every pinned entry, oldest first.
func (x *pendingIndex) allPinned() []*store.QueueEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	all := map[string]*pendingItem{}
	for _, m := range x.pinned {
		for id, it := range m {
			all[id] = it
		}
	}
	return sortedCopies(all)
}

func sortedCopies(m map[string]*pendingItem) []*store.QueueEntry {
	items := make([]*pendingItem, 0, len(m))
	for _, it := range m {
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b *pendingItem) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	out := make([]*store.QueueEntry, len(items))
	for i, it := range items {
		out[i] = it.copy()
	}
	return out
}

// oldestHead returns the oldest head among the label sets not in skip,
// with its route key; nil when there is none.
func (x *pendingIndex) oldestHead(skip map[string]bool) (string, *store.QueueEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best *pendingItem
	for key, s := range x.sets {
		if !skip[key] && (best == nil || s.heap[0].before(best)) {
			best = s.heap[0]
		}
	}
	if best == nil {
		return "", nil
	}
	return best.set.key, best.copy()
}

// behindHead returns the ids of the set's entries other than its head when
// the set was not yet brought in line with reason (in no particular
// order), and nil when it was.
func (x *pendingIndex) behindHead(key, reason string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.sets[key]
	if s == nil || s.synced == reason {
		return nil
	}
	ids := make([]string, 0, len(s.heap)-1)
	for _, it := range s.heap[1:] {
		ids = append(ids, it.e.ID)
	}
	return ids
}

// markSynced records that every entry of set key now carries reason (until
// the set's next arrival).
func (x *pendingIndex) markSynced(key, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s := x.sets[key]; s != nil {
		s.synced = reason
	}
}

// mark returns the index clock, taken before a store read that resync
// will merge.
func (x *pendingIndex) mark() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.clock
}

// resync merges the pending entries read from the store (the read began
// at clock since): entries the index lacks are added unless they left the
// index after since (claimed or cancelled here meanwhile); indexed entries
// the store no longer has pending are dropped unless they arrived after
// since. It returns how many entries were added and dropped.
func (x *pendingIndex) resync(list []*store.QueueEntry, since uint64) (added, dropped int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	inStore := make(map[string]bool, len(list))
	for _, e := range list {
		inStore[e.ID] = true
		if _, ok := x.items[e.ID]; ok {
			continue
		}
		if left, ok := x.gone[e.ID]; ok && left > since {
			continue
		}
		x.putLocked(e)
		added++
	}
	for id, it := range x.items {
		if !inStore[id] && it.order <= since {
			x.removeLocked(id)
			dropped++
		}
	}
	for id, left := range x.gone {
		if left <= since {
			delete(x.gone, id)
		}
	}
	return added, dropped
}

// before orders entries oldest first: CreatedAt, then arrival.
func (it *pendingItem) before(o *pendingItem) bool {
	if !it.e.CreatedAt.Equal(o.e.CreatedAt) {
		return it.e.CreatedAt.Before(o.e.CreatedAt)
	}
	return it.order < o.order
}

// itemHeap is a min-heap of entries by before (container/heap).
type itemHeap []*pendingItem

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

// Push and Pop implement heap.Interface.
func (h *itemHeap) Push(v any) {
	it := v.(*pendingItem)
	it.pos = len(*h)
	*h = append(*h, it)
}

// Pop removes the last element (heap.Interface).
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// resyncInterval is how often the index is merged with the store's pending
// queue (entries another node enqueued become visible here within it).
const resyncInterval = 10 * time.Second

// loneResyncInterval is that interval for a node alone on its database
// (SQLite, or PostgreSQL while no other node is alive), where every entry
// went through this node's index: the merge reads the whole pending queue
// (100,000 entries: about 0.26 s of SQLite reading alone on this project's
// 2-core test machine, in the dispatcher's loop, with their garbage after),
// and is only a safety net there.
const loneResyncInterval = 5 * time.Minute
