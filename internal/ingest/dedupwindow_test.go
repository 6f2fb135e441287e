package ingest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/webhook"
)

// With the cluster setting webhook_dedup_ttl_ms lowered to one minute, the
// same delivery id sent again after the window creates a second run (a new
// delivery), while a replay within the window creates none.
func TestDedupWindowReplayCreatesSecondRun(t *testing.T) {
	h := newHarness(t)
	ctx, c1 := h.startWithLock(t)

	reader := cluster.NewReader(h.st, nil, time.Hour, nil)
	if _, err := reader.Patch(ctx, []byte(`{"webhookDedupTtlMs":60000}`)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now().UTC()
	in := webhook.NewIngress(h.st, h.proc, webhook.Options{
		Now:      func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		DedupTTL: func(ctx context.Context) time.Duration { return reader.Duration(ctx, cluster.WebhookDedupTTLMs) },
	})
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", in.Generic())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func() (int, webhook.Response) {
		t.Helper()
		return postGenericPush(t, h, srv.URL, c1, "same-id")
	}
	processed := func(id string) {
		t.Helper()
		wait.For(t, 15*time.Second, "delivery "+id+" processed", func() bool {
			d, _ := h.delivery(id)
			return d.Status == store.DeliveryProcessed
		})
	}
	allRuns := func() int {
		t.Helper()
		runs, _, err := h.st.ListRuns(h.ctx, store.RunFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(runs)
	}
	base := h.src.RoutingKey + ":same-id"

	code, r := post()
	if code != http.StatusAccepted || r.DeliveryID != base {
		t.Fatalf("first: %d %+v", code, r)
	}
	processed(base)
	if n := allRuns(); n != 1 {
		t.Fatalf("runs after the first delivery = %d", n)
	}
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	if code, r := post(); code != http.StatusOK || !r.Duplicate {
		t.Fatalf("replay within the window: %d %+v", code, r)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	code, r = post()
	if code != http.StatusAccepted || r.DeliveryID != base+"@2" {
		t.Fatalf("replay after the window: %d %+v", code, r)
	}
	processed(base + "@2")
	runs := h.runsOf(base + "@2")
	if runs["ci"] == nil || len(runs) != 1 {
		t.Fatalf("runs of the new delivery %v", runs)
	}
	if n := allRuns(); n != 2 {
		t.Fatalf("runs = %d, want 2 (one per accepted delivery)", n)
	}
}
