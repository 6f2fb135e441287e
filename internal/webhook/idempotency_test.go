package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// A generic source with an idempotency key dedups on that key, whatever
// delivery id the sender puts in its headers, and refuses requests without it.
func TestGenericIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		set  store.SourceSettings
	}{
		{"bypath", store.SourceSettings{IdempotencyKeyPath: "$.event.id"}},
		{"byheader", store.SourceSettings{IdempotencyKeyHeader: "X-Event-Id"}},
	} {
		src := &store.Source{ID: "idem-" + c.name, OrgID: "acme", Name: c.name, Provider: provider.Generic, RoutingKey: "generic:acme:idem-" + c.name,
			VerificationMethod: VerifyHMACSHA256, WebhookSecret: secret, Enabled: true, CreatedAt: time.Now().UTC()}
		if err := e.st.CreateSource(ctx, src); err != nil {
			t.Fatal(err)
		}
		c.set.SourceID = src.ID
		if err := e.st.PutSourceSettings(ctx, &c.set); err != nil {
			t.Fatal(err)
		}
		path := "/webhook/acme/generic/" + c.name
		body := []byte(`{"event":{"id":9007199254740993},"n":1}`)
		hdr := func(delivery string) map[string]string {
			h := map[string]string{HeaderSignature: sign(body), HeaderDelivery: delivery}
			if c.set.IdempotencyKeyHeader != "" {
				h["X-Event-Id"] = "9007199254740993"
			}
			return h
		}
		code, r := e.post(t, path, body, hdr("first"))
		if code != http.StatusAccepted || r.DeliveryID != src.RoutingKey+":9007199254740993" {
			t.Fatalf("%s: first: %d %+v (the key must be exact, even for a 64-bit number)", c.name, code, r)
		}
		// Same key, another sender delivery id: a duplicate.
		code, r = e.post(t, path, body, hdr("second"))
		if code != http.StatusOK || !r.Duplicate {
			t.Fatalf("%s: replay with a new delivery id: %d %+v, want 200 duplicate", c.name, code, r)
		}
		// No key: refused, nothing stored.
		before := e.count(t)
		noKey := []byte(`{"event":{},"n":2}`)
		code, r = e.post(t, path, noKey, map[string]string{HeaderSignature: sign(noKey)})
		if code != http.StatusBadRequest {
			t.Fatalf("%s: missing key: %d %+v, want 400", c.name, code, r)
		}
		if e.count(t) != before {
			t.Fatalf("%s: a request without its idempotency key was stored", c.name)
		}
	}
}
