package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/store"
)

// windowEnv is newEnv's sources behind an ingress whose clock the test
// moves and whose dedup window is the live cluster setting.
type windowEnv struct {
	*env
	reader *cluster.Reader
	mu     sync.Mutex
	now    time.Time
}

func newWindowEnv(t *testing.T) *windowEnv {
	t.Helper()
	w := &windowEnv{env: newEnv(t), now: time.Now().UTC().Truncate(time.Millisecond)}
	w.reader = cluster.NewReader(w.st, nil, time.Hour, nil)
	in := NewIngress(w.st, SubmitFunc(func(d *store.Delivery) {
		id := d.ID
		w.env.mu.Lock()
		w.submitted = append(w.submitted, id)
		w.env.mu.Unlock()
	}), Options{
		Now: func() time.Time {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.now
		},
		DedupTTL: func(ctx context.Context) time.Duration { return w.reader.Duration(ctx, cluster.WebhookDedupTTLMs) },
	})
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", in.Generic())
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *windowEnv) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func (w *windowEnv) setTTL(t *testing.T, body string) {
	t.Helper()
	if _, err := w.reader.Patch(context.Background(), []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func (w *windowEnv) submittedIDs() []string {
	w.env.mu.Lock()
	defer w.env.mu.Unlock()
	return append([]string(nil), w.submitted...)
}

// A delivery id is a duplicate within the dedup window and a new delivery
// after it; the window is the live cluster setting webhook_dedup_ttl_ms,
// changed through the reader without a restart, and is measured from the
// newest acceptance of the id.
func TestDedupWindowFollowsClusterSetting(t *testing.T) {
	w := newWindowEnv(t)
	ctx := context.Background()
	hdr := map[string]string{HeaderSignature: sign(pushBody), HeaderEventType: "push", HeaderDelivery: "d-1"}
	base := w.src.RoutingKey + ":d-1"
	post := func(wantCode int, wantID string, wantDup bool) {
		t.Helper()
		code, r := w.post(t, "/webhook/acme/generic/app", pushBody, hdr)
		if code != wantCode || r.DeliveryID != wantID || r.Duplicate != wantDup {
			t.Fatalf("got %d %+v, want %d %s duplicate=%v", code, r, wantCode, wantID, wantDup)
		}
	}

	w.setTTL(t, `{"webhookDedupTtlMs":60000}`)
	post(http.StatusAccepted, base, false)
	w.advance(30 * time.Second)
	post(http.StatusOK, base, true) // within the 1 min window
	w.advance(31 * time.Second)
	post(http.StatusAccepted, base+"@2", false) // 61 s after the first acceptance
	w.advance(10 * time.Second)
	post(http.StatusOK, base+"@2", true) // the window restarts at the new acceptance

	// Raised back to the 24 h default (null): two minutes on, a duplicate.
	w.setTTL(t, `{"webhookDedupTtlMs":null}`)
	w.advance(2 * time.Minute)
	post(http.StatusOK, base+"@2", true)
	// Lowered to 1 s: the same replay is now a new delivery.
	w.setTTL(t, `{"webhookDedupTtlMs":1000}`)
	post(http.StatusAccepted, base+"@3", false)

	if got := w.submittedIDs(); len(got) != 3 || got[0] != base || got[1] != base+"@2" || got[2] != base+"@3" {
		t.Fatalf("submitted %v, want each accepted generation once", got)
	}
	for _, id := range []string{base + "@2", base + "@3"} {
		d, err := w.st.GetDelivery(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if d.Status != store.DeliveryReceived || string(d.Payload) != string(pushBody) || d.Event != "push" {
			t.Fatalf("%s stored as %+v", id, d)
		}
		entries, _, err := w.st.ListEventLog(ctx, store.EventLogFilter{DeliveryID: id, Status: store.EventLogReceived})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if e.DeliveryID == id {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d received event-log entries, want its own one", id, n)
		}
	}
	dups, _, err := w.st.ListEventLog(ctx, store.EventLogFilter{DeliveryID: base, Status: store.EventLogDuplicate})
	if err != nil {
		t.Fatal(err)
	}
	if len(dups) != 3 {
		t.Fatalf("duplicate event-log entries = %d, want 3", len(dups))
	}
}

// 100 concurrent replays of an id whose window has passed give exactly one
// new delivery; the other 99 are duplicates of it.
func TestDedupWindowConcurrentReplays(t *testing.T) {
	w := newWindowEnv(t)
	w.setTTL(t, `{"webhookDedupTtlMs":1000}`)
	hdr := map[string]string{HeaderSignature: sign(pushBody), HeaderEventType: "push", HeaderDelivery: "d-race"}
	base := w.src.RoutingKey + ":d-race"
	if code, r := w.post(t, "/webhook/acme/generic/app", pushBody, hdr); code != http.StatusAccepted {
		t.Fatalf("first: %d %+v", code, r)
	}
	w.advance(2 * time.Second)

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	ids := map[string]int{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, r := w.post(t, "/webhook/acme/generic/app", pushBody, hdr)
			mu.Lock()
			codes[code]++
			ids[r.DeliveryID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[http.StatusAccepted] != 1 || codes[http.StatusOK] != 99 {
		t.Fatalf("answers %v, want one 202 and 99 200", codes)
	}
	if ids[base+"@2"] != 100 {
		t.Fatalf("delivery ids answered %v, want all %s", ids, base+"@2")
	}
	got := w.submittedIDs()
	sort.Strings(got)
	if len(got) != 2 || got[0] != base || got[1] != base+"@2" {
		t.Fatalf("submitted %v", got)
	}
	if _, err := w.st.GetDelivery(context.Background(), base+"@3"); err == nil {
		t.Fatal("a third generation was stored")
	}
}

// The newest generation is found however many there are.
func TestLatestGeneration(t *testing.T) {
	w := newWindowEnv(t)
	ctx := context.Background()
	in := NewIngress(w.st, nil, Options{})
	base := w.src.RoutingKey + ":gen"
	for n := 1; n <= 13; n++ {
		d := &store.Delivery{ID: GenerationID(base, n), SourceID: w.src.ID, OrgID: w.src.OrgID, Event: "push", ReceivedAt: time.Now().UTC()}
		if err := w.st.InsertDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
		got, d2, err := in.latestGeneration(ctx, base)
		if err != nil || got != n || d2.ID != GenerationID(base, n) {
			t.Fatalf("after %d generations: %d %v %v", n, got, d2, err)
		}
	}
}
