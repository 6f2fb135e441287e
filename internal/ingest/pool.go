package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/store"
)

// DefaultWorkers is how many deliveries are processed at once.
const DefaultWorkers = 8

// maxScheduled bounds the delivery ids held in memory (queued per key or
// being processed); beyond it Submit's buffer fills and the ids are left to
// the store re-scan, so nothing accepted is lost and memory stays bounded.
const maxScheduled = 8192

// orderKey names the stream a delivery must be processed in order within:
// the same source and ref (a push's runs are created in delivery order; a
// pull request's events in order per pull request). Deliveries with no
// ref of their own (schedules, internal events) have no order to keep and
// get their own key.
func orderKey(d *store.Delivery) string {
	var p struct {
		Ref         string `json:"ref"`
		PullRequest *struct {
			Number int64 `json:"number"`
		} `json:"pull_request"`
		Number int64 `json:"number"`
	}
	_ = json.Unmarshal(d.Payload, &p)
	switch {
	case p.Ref != "":
		return d.SourceID + "\x00ref\x00" + p.Ref
	case p.PullRequest != nil && p.PullRequest.Number > 0:
		return d.SourceID + "\x00pr\x00" + strconv.FormatInt(p.PullRequest.Number, 10)
	case p.Number > 0 && d.SourceID != "":
		return d.SourceID + "\x00pr\x00" + strconv.FormatInt(p.Number, 10)
	}
	return "\x00delivery\x00" + d.ID
}

// scheduler hands deliveries to a bounded pool of workers, at most one
// delivery per order key at a time, the others of the key waiting in
// arrival order. It runs on the loop goroutine only (no locking).
type scheduler struct {
	p       *Processor
	workers int
	busy    int
	known   map[string]bool   // ids queued or in flight
	waiting map[string][]work // key → deliveries behind the one in flight
	active  map[string]bool   // keys with a delivery in flight
	done    chan string       // a worker finished the key
	ready   []work            // keys free to start, in arrival order
	// handedBytes is the payload bytes of the handed rows queued
	// (maxHandedBytes).
	handedBytes int
}

// work is a delivery to process: its id, order key and, when the ingress
// handed it over, its row and source.
type work struct {
	key, id string
	h       *handed
}

// submitted is a delivery queued by Submit (id alone: key ""), by
// SubmitDelivery (key is its order key, computed from the row in hand) or
// by SubmitAccepted (with the row and source handed over).
type submitted struct {
	id, key string
	h       *handed
}

func newScheduler(p *Processor) *scheduler {
	n := p.Workers
	if n <= 0 {
		n = DefaultWorkers
	}
	return &scheduler{p: p, workers: n, known: map[string]bool{}, waiting: map[string][]work{},
		active: map[string]bool{}, done: make(chan string, n)}
}

// full reports whether no more ids should be taken in.
func (s *scheduler) full() bool { return len(s.known) >= maxScheduled }

// idle reports whether nothing is queued or in flight.
func (s *scheduler) idle() bool { return len(s.known) == 0 }

// add schedules a delivery id (ignored if already scheduled). A delivery
// submitted by id alone is read once here for its order key; one that is
// gone or already processed is dropped.
func (s *scheduler) add(ctx context.Context, id string) {
	if s.known[id] {
		return
	}
	d, err := s.p.st.GetDelivery(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			s.p.log.Error("ingest: read delivery", "deliveryId", id, "error", err)
		}
		return
	}
	s.addRow(ctx, d)
}

// addRow schedules a delivery whose row is in hand (accepted just now,
// or listed by the re-scan), so it costs no read of its own. One no
// longer "received" is dropped; one processed meanwhile by another node
// is found so by its claim (Process).
func (s *scheduler) addRow(ctx context.Context, d *store.Delivery) {
	s.addKeyed(ctx, d.ID, d.Status, orderKey(d), nil)
}

// addKeyed schedules delivery id of order key key; h, when not nil, is
// kept with it unless the handed rows queued would pass maxHandedBytes.
func (s *scheduler) addKeyed(ctx context.Context, id string, st store.DeliveryStatus, key string, h *handed) {
	if s.known[id] || st != store.DeliveryReceived {
		return
	}
	s.known[id] = true
	if s.handedBytes+h.payloadBytes() > maxHandedBytes {
		h = nil
	}
	s.handedBytes += h.payloadBytes()
	w := work{key: key, id: id, h: h}
	if s.active[key] {
		s.waiting[key] = append(s.waiting[key], w)
		return
	}
	s.active[key] = true
	s.ready = append(s.ready, w)
	s.startReady(ctx)
}

// startReady starts ready work while workers are free.
func (s *scheduler) startReady(ctx context.Context) {
	for s.busy < s.workers && len(s.ready) > 0 {
		w := s.ready[0]
		s.ready = s.ready[1:]
		s.busy++
		s.handedBytes -= w.h.payloadBytes()
		go func() {
			s.p.processLogged(ctx, w.id, w.h)
			s.done <- w.key + "\x00\x00" + w.id
		}()
	}
}

// finished records a worker's end and starts what it unblocked.
func (s *scheduler) finished(ctx context.Context, msg string) {
	s.busy--
	key, id := splitDone(msg)
	delete(s.known, id)
	if next := s.waiting[key]; len(next) > 0 {
		s.waiting[key] = next[1:]
		if len(next) == 1 {
			delete(s.waiting, key)
		}
		s.ready = append(s.ready, next[0])
	} else {
		delete(s.active, key)
	}
	s.startReady(ctx)
}

func splitDone(msg string) (key, id string) {
	for i := len(msg) - 2; i >= 0; i-- {
		if msg[i] == 0 && msg[i+1] == 0 {
			return msg[:i], msg[i+2:]
		}
	}
	return msg, ""
}

// wait blocks until every worker has finished (Stop).
func (s *scheduler) wait() {
	for s.busy > 0 {
		<-s.done
		s.busy--
	}
}

func (p *Processor) loop(ctx context.Context) {
	defer close(p.done)
	interval := p.RescanInterval
	if interval <= 0 {
		interval = DefaultRescanInterval
	}
	s := newScheduler(p)
	defer s.wait()
	defer p.releaseQueued(s)
	more := p.rescan(ctx, s)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		in := p.ch
		if s.full() {
			in = nil // leave further ids to the re-scan
		}
		select {
		case <-ctx.Done():
			return
		case sub := <-in:
			if sub.key == "" {
				s.add(ctx, sub.id)
			} else {
				s.addKeyed(ctx, sub.id, store.DeliveryReceived, sub.key, sub.h)
			}
		case msg := <-s.done:
			s.finished(ctx, msg)
			if more && s.idle() {
				// The last re-scan was cut at its batch size: take the
				// next batch now rather than at the next tick.
				more = p.rescan(ctx, s)
			}
		case <-ticker.C:
			if !s.full() {
				more = p.rescan(ctx, s)
			}
		}
	}
}

// rescan schedules deliveries still "received" in the store; it reports
// whether there may be more than one batch of them.
func (p *Processor) rescan(ctx context.Context, s *scheduler) bool {
	ds, err := p.st.ListUnprocessedDeliveries(ctx, rescanBatch)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("ingest: list unprocessed deliveries", "error", err)
		}
		return false
	}
	added := 0
	for _, d := range ds {
		if ctx.Err() != nil {
			return false
		}
		if !s.known[d.ID] {
			added++
		}
		s.addRow(ctx, d)
	}
	return len(ds) == rescanBatch && added > 0
}

// localRepo returns the shared handle of the local repository at path, so
// its object reader (one `git cat-file --batch` process) serves every
// delivery of the source.
func (p *Processor) localRepo(path string) (*local.Repo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.repos[path]; ok {
		return r, nil
	}
	r, err := local.Open(path)
	if err != nil {
		return nil, err
	}
	if p.repos == nil {
		p.repos = map[string]*local.Repo{}
	}
	p.repos[path] = r
	return r, nil
}

// headRefTTL is how long the branch a local repository's HEAD names is
// reused: reading it forks git, and a burst of pushes to one repository
// would otherwise fork once per delivery. A HEAD switched meanwhile is
// seen that much later.
const headRefTTL = 5 * time.Second

type headRefEntry struct {
	ref string
	ok  bool
	at  time.Time
}

// headRef returns the ref HEAD of the local repository at path points to
// (git symbolic-ref), cached for headRefTTL; ok is false for a detached
// HEAD or a git failure.
func (p *Processor) headRef(ctx context.Context, path string) (string, bool) {
	p.mu.Lock()
	e, hit := p.heads[path]
	p.mu.Unlock()
	if hit && time.Since(e.at) < headRefTTL {
		return e.ref, e.ok
	}
	out, err := exec.CommandContext(ctx, "git", "-C", path, "symbolic-ref", "-q", "HEAD").Output()
	e = headRefEntry{ref: strings.TrimSpace(string(out)), ok: err == nil, at: time.Now()}
	p.mu.Lock()
	if p.heads == nil {
		p.heads = map[string]headRefEntry{}
	}
	p.heads[path] = e
	p.mu.Unlock()
	return e.ref, e.ok
}

// closeRepos stops the object readers of the local repositories.
func (p *Processor) closeRepos() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for path, r := range p.repos {
		r.Close()
		delete(p.repos, path)
	}
}

// localLock reads the lock of a local source at commit sha through the
// lock cache, keyed by source and commit like every forge's, so a burst of
// deliveries for one commit reads and parses it once. A missing lock
// yields (nil, nil) with the trace's summary and lock status set; a
// corrupt or oversized one an error that fails the delivery.
func (p *Processor) localLock(ctx context.Context, src *store.Source, repo *local.Repo, sha string, tr *Trace) (*lockfile.LockFile, error) {
	res, err := p.forges().Locks.Get(ctx, "local:"+src.ID, repo.Path(), sha, func(ctx context.Context, maxBytes int64) ([]byte, error) {
		data, err := repo.ReadLock(ctx, sha)
		if errors.Is(err, local.ErrLockNotFound) {
			return nil, lockfetch.ErrMissing
		}
		return data, err
	})
	if err != nil {
		return nil, err
	}
	switch res.Status {
	case lockfetch.StatusOK:
		return res.Lock, nil
	case lockfetch.StatusMissing:
		tr.Summary = "no lock file at " + sha
		tr.LockStatus = LockMissing
		return nil, nil
	case lockfetch.StatusTooLarge:
		tr.LockStatus = LockTooLarge
		return nil, fmt.Errorf("lock file at %s: %s", sha, res.Detail)
	default:
		tr.LockStatus = LockCorrupt
		return nil, fmt.Errorf("invalid lock file at %s: %s", sha, res.Detail)
	}
}

func (p *Processor) observeOutcome(status store.DeliveryStatus, runs int) {
	if p.outcome != nil {
		p.outcome(string(status), runs)
	}
}
