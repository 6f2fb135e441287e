package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

const secret = "s3cret-webhook-key"

type env struct {
	st        store.Store
	srv       *httptest.Server
	mu        sync.Mutex
	submitted []string
	src       *store.Source
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{st: teststore.SQLite(t)}
	ctx := context.Background()
	e.src = &store.Source{ID: "src-1", OrgID: "acme", Name: "app", Provider: provider.Local, RoutingKey: "generic:acme:src-1",
		LocalPath: "/srv/app", VerificationMethod: VerifyHMACSHA256, WebhookSecret: secret, Enabled: true, CreatedAt: time.Now().UTC()}
	if err := e.st.CreateSource(ctx, e.src); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*store.Source{
		{ID: "src-2", OrgID: "acme", Name: "off", Provider: provider.Local, RoutingKey: "generic:acme:src-2",
			VerificationMethod: VerifyHMACSHA256, WebhookSecret: secret, Enabled: false, CreatedAt: time.Now().UTC()},
		{ID: "src-3", OrgID: "acme", Name: "hook", Provider: provider.Generic, RoutingKey: "generic:acme:src-3",
			VerificationMethod: VerifyBearerToken, WebhookSecret: secret, Enabled: true, CreatedAt: time.Now().UTC()},
	} {
		if err := e.st.CreateSource(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", NewGenericHandler(e.st, SubmitFunc(func(d *store.Delivery) {
		id := d.ID
		e.mu.Lock()
		e.submitted = append(e.submitted, id)
		e.mu.Unlock()
	}), nil))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (e *env) post(t *testing.T, path string, body []byte, hdr map[string]string) (int, Response) {
	t.Helper()
	code, r, _ := postWebhook(t, e.srv.URL+path, body, map[string]string{"Content-Type": "application/json"}, hdr)
	return code, r
}

var pushBody = []byte(`{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"1111111111111111111111111111111111111111","repository":{"full_name":"acme/app","path":"/srv/app"},"sender":{"login":"dev"}}`)

func (e *env) count(t *testing.T) int {
	t.Helper()
	ds, err := e.st.ListUnprocessedDeliveries(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(ds)
}

func TestGenericAcceptDuplicate(t *testing.T) {
	e := newEnv(t)
	hdr := map[string]string{HeaderSignature: sign(pushBody), HeaderEventType: "push", HeaderDelivery: "d-1"}
	code, r := e.post(t, "/webhook/acme/generic/app", pushBody, hdr)
	if code != http.StatusAccepted || !r.Accepted || r.DeliveryID != "generic:acme:src-1:d-1" {
		t.Fatalf("got %d %+v", code, r)
	}
	d, err := e.st.GetDelivery(context.Background(), r.DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != store.DeliveryReceived || d.Event != "push" || d.SourceID != "src-1" || d.OrgID != "acme" {
		t.Fatalf("delivery %+v", d)
	}
	var p map[string]any
	if err := json.Unmarshal(d.Payload, &p); err != nil || p["ref"] != "refs/heads/main" {
		t.Fatalf("payload %s: %v", d.Payload, err)
	}
	if len(e.submitted) != 1 || e.submitted[0] != r.DeliveryID {
		t.Fatalf("submitted %v", e.submitted)
	}

	code, r = e.post(t, "/webhook/acme/generic/app", pushBody, hdr)
	if code != http.StatusOK || !r.Accepted || !r.Duplicate {
		t.Fatalf("duplicate: %d %+v", code, r)
	}
	if len(e.submitted) != 1 || e.count(t) != 1 {
		t.Fatalf("duplicate was submitted/persisted: %v", e.submitted)
	}

	// GitHub-style signature header and a body-hash delivery id.
	body2 := []byte(`{"ref":"refs/heads/dev"}`)
	code, r = e.post(t, "/webhook/acme/generic/app", body2, map[string]string{HeaderHubSignature: sign(body2), HeaderEventType: "push"})
	sum := sha256.Sum256(body2)
	if code != http.StatusAccepted || r.DeliveryID != "generic:acme:src-1:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("hub signature: %d %+v", code, r)
	}
	// X-Request-ID fallback.
	code, r = e.post(t, "/webhook/acme/generic/app", body2, map[string]string{HeaderSignature: sign(body2), HeaderEventType: "push", HeaderRequestID: "req-9"})
	if code != http.StatusAccepted || r.DeliveryID != "generic:acme:src-1:req-9" {
		t.Fatalf("request id: %d %+v", code, r)
	}
}

func TestGenericRejections(t *testing.T) {
	e := newEnv(t)
	good := map[string]string{HeaderSignature: sign(pushBody), HeaderEventType: "push"}
	cases := []struct {
		name string
		path string
		body []byte
		hdr  map[string]string
		want int
	}{
		{"bad signature", "/webhook/acme/generic/app", pushBody, map[string]string{HeaderSignature: sign([]byte("other")), HeaderEventType: "push"}, 401},
		{"malformed signature", "/webhook/acme/generic/app", pushBody, map[string]string{HeaderSignature: "sha256=zz", HeaderEventType: "push"}, 401},
		{"missing signature", "/webhook/acme/generic/app", pushBody, map[string]string{HeaderEventType: "push"}, 401},
		{"unknown source", "/webhook/acme/generic/nope", pushBody, good, 404},
		{"unknown org", "/webhook/other/generic/app", pushBody, good, 404},
		{"disabled source", "/webhook/acme/generic/off", pushBody, good, 404},
		{"missing event header", "/webhook/acme/generic/app", pushBody, map[string]string{HeaderSignature: sign(pushBody)}, 400},
		{"not json", "/webhook/acme/generic/app", []byte("ref=main"), map[string]string{HeaderSignature: sign([]byte("ref=main")), HeaderEventType: "push"}, 400},
		{"bearer wrong", "/webhook/acme/generic/hook", pushBody, map[string]string{"Authorization": "Bearer nope"}, 401},
	}
	for _, c := range cases {
		code, r := e.post(t, c.path, c.body, c.hdr)
		if code != c.want || r.Accepted || r.Error == "" {
			t.Errorf("%s: got %d %+v, want %d", c.name, code, r, c.want)
		}
	}
	if n := e.count(t); n != 0 || len(e.submitted) != 0 {
		t.Fatalf("rejected requests persisted %d / submitted %v", n, e.submitted)
	}

	// Oversized: signed correctly, still refused before anything is stored.
	big := []byte(`{"pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`)
	code, _ := e.post(t, "/webhook/acme/generic/app", big, map[string]string{HeaderSignature: sign(big), HeaderEventType: "push"})
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", code)
	}
	// Oversized without a Content-Length (chunked): still 413.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/webhook/acme/generic/app", struct{ *bytes.Reader }{bytes.NewReader(big)})
	req.Header.Set(HeaderEventType, "push")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength > 0 {
		t.Fatalf("chunked oversized: %d (content-length %d)", resp.StatusCode, req.ContentLength)
	}
	if e.count(t) != 0 {
		t.Fatal("oversized body persisted")
	}
}

func TestGenericSourceWithoutEventHeader(t *testing.T) {
	e := newEnv(t)
	code, r := e.post(t, "/webhook/acme/generic/hook", []byte(`{"a":1}`), map[string]string{"Authorization": "Bearer " + secret})
	if code != http.StatusAccepted {
		t.Fatalf("%d %+v", code, r)
	}
	d, err := e.st.GetDelivery(context.Background(), r.DeliveryID)
	if err != nil || d.Event != DefaultGenericEvent {
		t.Fatalf("delivery %+v %v", d, err)
	}
}

type failingStore struct{ store.Store }

func (failingStore) AcceptDelivery(context.Context, *store.Delivery, *store.EventLogEntry) error {
	return errors.New("disk full")
}

func TestPersistFailureIs500AndNotSubmitted(t *testing.T) {
	e := newEnv(t)
	var submitted []string
	h := NewGenericHandler(failingStore{e.st}, SubmitFunc(func(d *store.Delivery) {
		submitted = append(submitted, d.ID)
	}), nil)
	req := httptest.NewRequest(http.MethodPost, "/webhook/acme/generic/app", bytes.NewReader(pushBody))
	req.Header.Set(HeaderSignature, sign(pushBody))
	req.Header.Set(HeaderEventType, "push")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req) // no mux: org and name parsed from the URL path
	if rec.Code != http.StatusInternalServerError || len(submitted) != 0 {
		t.Fatalf("got %d, submitted %v", rec.Code, submitted)
	}
}
