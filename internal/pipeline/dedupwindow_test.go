package pipeline

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

	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/webhook"
)

// With the cluster setting webhook_dedup_ttl_ms lowered to one minute, the
// same delivery id sent again after the window creates a second run (a new
// delivery), while a replay within the window creates none.
func TestDedupWindowReplayCreatesSecondRun(t *testing.T) {
	h := newHarness(t)
	h.repo.write(lockfile.Path, testLock)
	c1 := h.repo.commit("initial")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	h.proc.Start(ctx)
	defer h.proc.Stop()

	reader := cluster.NewReader(h.st, nil, time.Hour, nil)
	if _, err := reader.Patch(ctx, []byte(`{"webhookDedupTtlMs":60000}`)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now().UTC()
	in := webhook.NewIngress(h.st, h.proc.Submit, webhook.Options{
		Now:      func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		DedupTTL: func(ctx context.Context) time.Duration { return reader.Duration(ctx, cluster.WebhookDedupTTLMs) },
	})
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", in.Generic())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000",
		"after": c1, "repository": map[string]string{"full_name": "acme/app", "path": h.repo.dir}, "sender": map[string]string{"login": "dev"}})
	mac := hmac.New(sha256.New, []byte(h.src.WebhookSecret))
	mac.Write(body)
	post := func() (int, webhook.Response) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook/acme/generic/app", bytes.NewReader(body))
		req.Header.Set(webhook.HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
		req.Header.Set(webhook.HeaderEventType, "push")
		req.Header.Set(webhook.HeaderDelivery, "same-id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r webhook.Response
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	processed := func(id string) {
		t.Helper()
		waitFor(t, "delivery "+id+" processed", func() bool {
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
