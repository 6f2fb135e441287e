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
	"testing"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/webhook"
)

// A signed push posted to the generic route is persisted, submitted and
// turned into a run by the running processor.
func TestWebhookToRun(t *testing.T) {
	h := newHarness(t)
	h.repo.write(lockfile.Path, testLock)
	c1 := h.repo.commit("initial")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	h.proc.Start(ctx)
	defer h.proc.Stop()

	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", webhook.NewGenericHandler(h.st, h.proc.Submit, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000",
		"after": c1, "repository": map[string]string{"full_name": "acme/app", "path": h.repo.dir}, "sender": map[string]string{"login": "dev"}})
	mac := hmac.New(sha256.New, []byte(h.src.WebhookSecret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook/acme/generic/app", bytes.NewReader(body))
	req.Header.Set(webhook.HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set(webhook.HeaderEventType, "push")
	req.Header.Set(webhook.HeaderDelivery, "e2e-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var r webhook.Response
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || r.DeliveryID != "generic:acme:src-1:e2e-1" {
		t.Fatalf("%d %+v", resp.StatusCode, r)
	}
	waitFor(t, "run for the delivery", func() bool {
		d, _ := h.delivery(r.DeliveryID)
		return d.Status == store.DeliveryProcessed
	})
	runs := h.runsOf(r.DeliveryID)
	if runs["ci"] == nil || len(runs) != 1 {
		t.Fatalf("runs %v", runs)
	}
}
