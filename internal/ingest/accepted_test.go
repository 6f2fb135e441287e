package ingest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/runs"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/webhook"
)

// claimCounter counts the store calls an accepted delivery's processing
// can spare: taking the claim and reading the source and its settings.
type claimCounter struct {
	store.Store
	mu                      sync.Mutex
	takes, sources, setting int
}

func (c *claimCounter) TakeDelivery(ctx context.Context, id, holder string, ttl time.Duration) (*store.Delivery, bool, error) {
	c.mu.Lock()
	c.takes++
	c.mu.Unlock()
	return c.Store.TakeDelivery(ctx, id, holder, ttl)
}

func (c *claimCounter) GetSource(ctx context.Context, id string) (*store.Source, error) {
	c.mu.Lock()
	c.sources++
	c.mu.Unlock()
	return c.Store.GetSource(ctx, id)
}

func (c *claimCounter) GetSourceSettings(ctx context.Context, id string) (*store.SourceSettings, error) {
	c.mu.Lock()
	c.setting++
	c.mu.Unlock()
	return c.Store.GetSourceSettings(ctx, id)
}

func (c *claimCounter) counts() (takes, sources, settings int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takes, c.sources, c.setting
}

// pushThroughIngress posts a signed push for after through the generic
// webhook route in front of proc and returns the delivery id.
func pushThroughIngress(t *testing.T, h *harness, srv *httptest.Server, raw, after string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": local.ZeroSHA, "after": after,
		"repository": map[string]string{"full_name": "acme/app", "path": h.repo.Dir}})
	m := hmac.New(sha256.New, []byte(h.src.WebhookSecret))
	m.Write(body)
	req, _ := http.NewRequest("POST", srv.URL+"/webhook/acme/generic/app", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderEventType, "push")
	req.Header.Set(webhook.HeaderDelivery, raw)
	req.Header.Set(webhook.HeaderSignature, "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans webhook.Response
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook answered %d %+v (%v), want 202", resp.StatusCode, ans, err)
	}
	return ans.DeliveryID
}

// ingressInFront is a harness with a committed lock, a processor on st
// (wrapped by wrap, for counting or gating) and the generic webhook route
// in front of it; it returns the processor, the server and the commit.
func ingressInFront(t *testing.T, wrap func(store.Store) store.Store) (*harness, *Processor, *httptest.Server, string) {
	t.Helper()
	h := newHarness(t)
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	proc := NewProcessor(wrap(h.st), runs.NewTracker(h.st, h.enq, nil, runs.TrackerDeps{}), nil, ProcessorDeps{})
	proc.RescanInterval = time.Hour
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", webhook.NewGenericHandler(h.st, proc, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, proc, srv, c1
}

// A webhook accepted by this node is processed from the row and source
// the ingress handed over: its processing neither claims it nor reads its
// source again, yet creates its runs as before. A processor that is not
// running claims nothing: a delivery accepted then is any node's.
func TestAcceptedDeliveryIsProcessedWithoutClaimOrSourceRead(t *testing.T) {
	var cc *claimCounter
	h, proc, srv, c1 := ingressInFront(t, func(st store.Store) store.Store { cc = &claimCounter{Store: st}; return cc })

	early := pushThroughIngress(t, h, srv, "early", c1)
	if ok, err := h.st.ClaimDelivery(h.ctx, early, "another-node", time.Minute); err != nil || !ok {
		t.Fatalf("another node claiming a delivery accepted before the processor ran = %v, %v; want it free", ok, err)
	}
	if err := h.st.ReleaseDeliveryClaim(h.ctx, early, "another-node"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	proc.Start(ctx) // its start-up re-scan finds the early one
	defer proc.Stop()
	wait.For(t, 15*time.Second, "early delivery processed", func() bool {
		d, _ := h.delivery(early)
		return d.Status == store.DeliveryProcessed
	})
	takes0, sources0, settings0 := cc.counts()

	id := pushThroughIngress(t, h, srv, "handed", c1)
	wait.For(t, 15*time.Second, "accepted delivery processed", func() bool {
		d, _ := h.delivery(id)
		return d.Status == store.DeliveryProcessed
	})
	_, tr := h.delivery(id)
	takes, sources, settings := cc.counts()
	takes, sources, settings = takes-takes0, sources-sources0, settings-settings0
	if len(tr.Runs) == 0 || takes != 0 || sources != 0 || settings != 0 {
		t.Fatalf("runs %d, claims taken %d, source reads %d, settings reads %d; want runs and no claim or read",
			len(tr.Runs), takes, sources, settings)
	}
}

// A handed-over delivery that waited past the first third of its lease
// is taken from the store like any other: when another node took it over
// meanwhile (this node stalled past the lease), this node leaves it alone.
func TestStaleAcceptedClaimIsTakenFromTheStore(t *testing.T) {
	var g *gatedFinish
	var cc *claimCounter
	h, proc, srv, c1 := ingressInFront(t, func(st store.Store) store.Store {
		cc = &claimCounter{Store: st}
		g = &gatedFinish{Store: cc, entered: make(chan struct{}, 4), open: make(chan struct{})}
		return g
	})
	proc.ClaimTTL = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	proc.Start(ctx)
	defer proc.Stop()

	first := pushThroughIngress(t, h, srv, "first", c1)
	<-g.entered // the first is being finished; the second, of the same ref, waits behind it
	second := pushThroughIngress(t, h, srv, "second", c1)
	wait.For(t, 5*time.Second, "another node takes the waiting delivery's expired claim", func() bool {
		ok, err := h.st.ClaimDelivery(h.ctx, second, "another-node", time.Hour)
		return err == nil && ok
	})
	takes0, _, _ := cc.counts()
	close(g.open)
	wait.For(t, 15*time.Second, "the stale hand-over tried in the store", func() bool {
		takes, _, _ := cc.counts()
		return takes > takes0
	})
	proc.Stop()
	if d, _ := h.delivery(first); d.Status != store.DeliveryProcessed {
		t.Fatalf("first delivery %s, want processed", d.Status)
	}
	d, _ := h.delivery(second)
	got, _, err := h.st.ListRuns(h.ctx, store.RunFilter{DeliveryID: second, Limit: 10})
	if err != nil || d.Status != store.DeliveryReceived || len(got) != 0 {
		t.Fatalf("second delivery %s with %d runs (%v); want it left received, with no run, to the node that took it",
			d.Status, len(got), err)
	}
}

// Handed rows kept in memory while they wait are bounded by
// maxHandedBytes: past it a delivery waits as its id alone, and what a
// worker takes is given back to the budget.
func TestHandedRowsAreBoundedInMemory(t *testing.T) {
	p := NewProcessor(nil, nil, nil, ProcessorDeps{})
	s := newScheduler(p)
	s.workers = 0 // nothing starts: everything waits
	big := func(id string) *handed {
		return &handed{d: &store.Delivery{ID: id, Payload: make(json.RawMessage, maxHandedBytes/2+1)}}
	}
	ctx := context.Background()
	s.addKeyed(ctx, "a", store.DeliveryReceived, "k1", big("a"))
	s.addKeyed(ctx, "b", store.DeliveryReceived, "k2", big("b"))
	s.addKeyed(ctx, "c", store.DeliveryReceived, "k1", big("c"))
	if len(s.ready) != 2 || s.ready[0].h == nil || s.ready[1].h != nil || len(s.waiting["k1"]) != 1 || s.waiting["k1"][0].h != nil {
		t.Fatalf("ready %+v, waiting %+v; want the first row kept, the two past the budget as ids", s.ready, s.waiting)
	}
	if s.handedBytes != maxHandedBytes/2+1 {
		t.Fatalf("handed bytes %d, want %d", s.handedBytes, maxHandedBytes/2+1)
	}
	s.workers = 1
	p.claimed["a"] = true // the worker finds it being processed and returns at once
	s.startReady(ctx)
	if s.handedBytes != 0 {
		t.Fatalf("handed bytes %d after the row was taken by a worker, want 0", s.handedBytes)
	}
	<-s.done
}

// gatedFinish holds every finish, alone (FinishDeliveryWithRuns) or
// grouped (FinishDeliveries), until open is closed.
type gatedFinish struct {
	store.Store
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedFinish) FinishDeliveryWithRuns(ctx context.Context, id string, st store.DeliveryStatus, errText string, decisions json.RawMessage, o store.EventOutcome, runs []store.NewRun) error {
	g.entered <- struct{}{}
	<-g.open
	return g.Store.FinishDeliveryWithRuns(ctx, id, st, errText, decisions, o, runs)
}

func (g *gatedFinish) FinishDeliveries(ctx context.Context, fs []store.DeliveryFinish) error {
	g.entered <- struct{}{}
	<-g.open
	return g.Store.FinishDeliveries(ctx, fs)
}

// A processor that stops gives up the accept-time claims of the
// deliveries still queued, so another node takes them at once rather
// than when their lease runs out.
func TestStopReleasesTheClaimsOfQueuedDeliveries(t *testing.T) {
	var g *gatedFinish
	h, proc, srv, c1 := ingressInFront(t, func(st store.Store) store.Store {
		g = &gatedFinish{Store: st, entered: make(chan struct{}, 4), open: make(chan struct{})}
		return g
	})
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	proc.Start(ctx)

	first := pushThroughIngress(t, h, srv, "first", c1)
	<-g.entered // the first is being finished; the second, of the same ref, waits behind it
	second := pushThroughIngress(t, h, srv, "second", c1)
	if ok, err := h.st.ClaimDelivery(h.ctx, second, "another-node", time.Minute); err != nil || ok {
		t.Fatalf("another node claiming the queued delivery = %v, %v; want refused while this node has it", ok, err)
	}
	stopped := make(chan struct{})
	go func() { proc.Stop(); close(stopped) }()
	wait.For(t, 10*time.Second, "queued delivery's claim released at stop", func() bool {
		ok, err := h.st.ClaimDelivery(h.ctx, second, "another-node", time.Minute)
		return err == nil && ok
	})
	close(g.open)
	<-stopped
	if d, _ := h.delivery(first); d.Status != store.DeliveryProcessed {
		t.Fatalf("first delivery %s after stop, want processed (stop waits for it)", d.Status)
	}
}
