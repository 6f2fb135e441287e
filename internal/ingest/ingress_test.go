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
	"testing"
	"time"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/wait"
	"kici.dev/kici/internal/webhook"
)

// startWithLock commits the test lock file to h's repo and runs the
// processor until the test ends. It returns the processor's context and the
// commit.
func (h *harness) startWithLock(t *testing.T) (context.Context, string) {
	h.repo.Write(lockfile.Path, testLock)
	c1 := h.repo.Commit("initial")
	ctx, cancel := context.WithCancel(h.ctx)
	t.Cleanup(cancel)
	h.proc.Start(ctx)
	t.Cleanup(h.proc.Stop)
	return ctx, c1
}

// postGenericPush posts a push of sha on main, signed with h's source
// secret, to the acme/app generic route of srvURL with the given delivery
// id, and returns the status code and the decoded answer.
func postGenericPush(t *testing.T, h *harness, srvURL, sha, delivery string) (int, webhook.Response) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": "0000000000000000000000000000000000000000",
		"after": sha, "repository": map[string]string{"full_name": "acme/app", "path": h.repo.Dir}, "sender": map[string]string{"login": "dev"}})
	mac := hmac.New(sha256.New, []byte(h.src.WebhookSecret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, srvURL+"/webhook/acme/generic/app", bytes.NewReader(body))
	req.Header.Set(webhook.HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set(webhook.HeaderEventType, "push")
	req.Header.Set(webhook.HeaderDelivery, delivery)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r webhook.Response
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r
}

// A signed push posted to the generic route is persisted, submitted and
// turned into a run by the running processor.
func TestWebhookToRun(t *testing.T) {
	h := newHarness(t)
	_, c1 := h.startWithLock(t)

	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", webhook.NewGenericHandler(h.st, h.proc, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, r := postGenericPush(t, h, srv.URL, c1, "e2e-1")
	if code != http.StatusAccepted || r.DeliveryID != "generic:acme:src-1:e2e-1" {
		t.Fatalf("%d %+v", code, r)
	}
	wait.For(t, 15*time.Second, "run for the delivery", func() bool {
		d, _ := h.delivery(r.DeliveryID)
		return d.Status == store.DeliveryProcessed
	})
	runs := h.runsOf(r.DeliveryID)
	if runs["ci"] == nil || len(runs) != 1 {
		t.Fatalf("runs %v", runs)
	}
}
