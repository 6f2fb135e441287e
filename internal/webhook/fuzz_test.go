package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// FuzzGenericWebhook drives POST /webhook/{orgId}/generic/{name} — the
// route anyone on the network can reach — with arbitrary bodies, event and
// delivery headers, and a valid, missing or wrong signature, against a
// real SQLite store. Whatever arrives: no panic, no 5xx, a JSON answer; a
// request without a valid signature is refused and stores nothing; a 202
// is a stored delivery holding exactly the body that was sent.
func FuzzGenericWebhook(f *testing.F) {
	ctx := context.Background()
	st := teststore.SQLite(f)
	src := &store.Source{ID: "src-f", OrgID: "acme", Name: "app", Provider: provider.Local, RoutingKey: "generic:acme:src-f",
		LocalPath: "/srv/app", VerificationMethod: VerifyHMACSHA256, WebhookSecret: secret, Enabled: true, CreatedAt: time.Now().UTC()}
	if err := st.CreateSource(ctx, src); err != nil {
		f.Fatal(err)
	}
	// A clock one second further on each reading keeps the per-source rate
	// limit from turning every later input into a 429.
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", NewIngress(st, nil, Options{Now: now}).Generic())

	f.Add(pushBody, "push", "d-1", uint8(0))
	f.Add(pushBody, "push", "d-1", uint8(2))
	f.Add([]byte(`{}`), "", "", uint8(0))
	f.Add([]byte(`not json`), "push", "x", uint8(0))
	f.Add([]byte(`[1,2]`), "pull_request", "", uint8(1))
	f.Add([]byte(`{"ref":"refs/heads/`+strings.Repeat("a", 300)+`"}`), "push", strings.Repeat("id", 200), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, event, delivery string, sigMode uint8) {
		if strings.ContainsAny(event+delivery, "\r\n\x00") {
			return // net/http refuses such header values before any handler
		}
		req := httptest.NewRequest(http.MethodPost, "/webhook/acme/generic/app", bytes.NewReader(body))
		req.Header.Set(HeaderEventType, event)
		req.Header.Set(HeaderDelivery, delivery)
		validSig := sigMode%3 == 0
		switch sigMode % 3 {
		case 0:
			req.Header.Set(HeaderSignature, sign(body))
		case 2:
			req.Header.Set(HeaderSignature, sign(append([]byte("x"), body...)))
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		code := rec.Code
		var r Response
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("status %d with a non-JSON answer %q", code, rec.Body.Bytes())
		}
		if code >= 500 {
			t.Fatalf("status %d: %+v", code, r)
		}
		if !validSig && code < 300 {
			t.Fatalf("accepted (%d %+v) without a valid signature", code, r)
		}
		switch code {
		case http.StatusAccepted, http.StatusOK:
			if !r.Accepted || r.DeliveryID == "" {
				t.Fatalf("status %d answer %+v", code, r)
			}
			d, err := st.GetDelivery(ctx, r.DeliveryID)
			if err != nil {
				t.Fatalf("answered %d for %s, which is not stored: %v", code, r.DeliveryID, err)
			}
			if code == http.StatusAccepted && !bytes.Equal(d.Payload, body) {
				t.Fatalf("stored payload differs from the body sent:\n%q\n%q", d.Payload, body)
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
			if r.Accepted || r.Error == "" {
				t.Fatalf("refusal %d answer %+v", code, r)
			}
		default:
			t.Fatalf("unexpected status %d: %+v", code, r)
		}
	})
}
