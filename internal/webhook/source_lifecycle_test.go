package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

// postRaw posts body to url with hdr and decodes the answer.
func postRaw(t *testing.T, url string, body []byte, hdr map[string]string) (int, Response) {
	t.Helper()
	code, r, _ := postWebhook(t, url, body, hdr)
	return code, r
}

// postWebhook posts body to url with the headers of each map in turn (a
// later map's value wins) and decodes the answer.
func postWebhook(t *testing.T, url string, body []byte, hdrs ...map[string]string) (int, Response, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for _, hdr := range hdrs {
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("status %d, undecodable body: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, r, resp.Header
}

// lifecycleEnv is a GitHub source and a generic source behind one ingress.
func lifecycleEnv(t *testing.T) (*ghEnv, *store.Source) {
	t.Helper()
	e := newGHEnv(t, Options{}, &store.SourceSettings{RateLimitRPM: -1}, "k")
	gen := &store.Source{ID: "src-gen", OrgID: "acme", Name: "hooks", Provider: provider.Generic, RoutingKey: "generic:acme:src-gen",
		VerificationMethod: VerifyHMACSHA256, WebhookSecret: secret, Enabled: true, CreatedAt: time.Now().UTC()}
	if err := e.st.CreateSource(context.Background(), gen); err != nil {
		t.Fatal(err)
	}
	return e, gen
}

// TestDisabledSourceRefusesDeliveries: a disabled source's GitHub and
// generic routes answer 404 "source is disabled" to correctly signed
// deliveries, store no delivery and no event-log entry, submit nothing,
// leave a rejected-delivery record each, and accept again once enabled.
func TestDisabledSourceRefusesDeliveries(t *testing.T) {
	e, gen := lifecycleEnv(t)
	ctx := context.Background()
	body := []byte(`{"ref":"refs/heads/main"}`)
	gh := func(delivery string) (int, Response) {
		code, r, _ := e.postGH(t, "push", delivery, body, map[string]string{HeaderHubSignature: signWith("k", body)})
		return code, r
	}
	generic := func(delivery string) (int, Response) {
		return postRaw(t, e.srv.URL+"/webhook/acme/generic/hooks", body, map[string]string{HeaderSignature: sign(body),
			HeaderEventType: "push", HeaderDelivery: delivery, "Content-Type": "application/json"})
	}

	for _, id := range []string{e.src.ID, gen.ID} {
		if err := e.st.SetSourceEnabled(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if code, r := gh("d1"); code != http.StatusNotFound || r.Accepted || r.Error != MsgSourceDisabled {
		t.Fatalf("github route, disabled: %d %+v, want 404 %q", code, r, MsgSourceDisabled)
	}
	if code, r := generic("g1"); code != http.StatusNotFound || r.Accepted || r.Error != MsgSourceDisabled {
		t.Fatalf("generic route, disabled: %d %+v, want 404 %q", code, r, MsgSourceDisabled)
	}
	deliveries, logEntries, _ := e.traces(t)
	if deliveries != 0 || logEntries != 0 || len(e.submitted) != 0 {
		t.Fatalf("a disabled source stored %d deliveries, %d event-log entries, submitted %v", deliveries, logEntries, e.submitted)
	}
	for _, c := range []struct{ id, route, header string }{{e.src.ID, "github", "d1"}, {gen.ID, "generic", "g1"}} {
		rej, err := e.st.ListRejected(ctx, c.id, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rej) != 1 || rej[0].StatusCode != 404 || rej[0].Reason != MsgSourceDisabled || rej[0].Route != c.route ||
			rej[0].DeliveryHeader != c.header || rej[0].PayloadSizeBytes != int64(len(body)) {
			t.Fatalf("%s rejected records = %+v, want one 404 %q", c.route, rej, MsgSourceDisabled)
		}
	}

	// Resumed: the same deliveries are accepted now.
	for _, id := range []string{e.src.ID, gen.ID} {
		if err := e.st.SetSourceEnabled(ctx, id, true); err != nil {
			t.Fatal(err)
		}
	}
	if code, r := gh("d1"); code != http.StatusAccepted || !r.Accepted {
		t.Fatalf("github route, re-enabled: %d %+v, want 202", code, r)
	}
	if code, r := generic("g1"); code != http.StatusAccepted || !r.Accepted {
		t.Fatalf("generic route, re-enabled: %d %+v, want 202", code, r)
	}
	if len(e.submitted) != 2 {
		t.Fatalf("submitted after re-enable = %v, want 2", e.submitted)
	}
}

// TestDeletedSourceWebhookIs404: once a source is deleted its routes answer
// 404 "source not found" (not "disabled"), and no rejected record is kept
// for a source that no longer exists.
func TestDeletedSourceWebhookIs404(t *testing.T) {
	e, gen := lifecycleEnv(t)
	ctx := context.Background()
	body := []byte(`{}`)
	for _, id := range []string{e.src.ID, gen.ID} {
		if err := e.st.DeleteSource(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	code, r, _ := e.postGH(t, "push", "d1", body, map[string]string{HeaderHubSignature: signWith("k", body)})
	if code != http.StatusNotFound || r.Error != "source not found" {
		t.Fatalf("github route, deleted source: %d %+v, want 404 source not found", code, r)
	}
	code, r = postRaw(t, e.srv.URL+"/webhook/acme/generic/hooks", body, map[string]string{HeaderSignature: sign(body), HeaderEventType: "push"})
	if code != http.StatusNotFound || r.Error != "source not found" {
		t.Fatalf("generic route, deleted source: %d %+v, want 404 source not found", code, r)
	}
	if rej, _ := e.st.ListRejected(ctx, "", 10); len(rej) != 0 {
		t.Fatalf("rejected records for a deleted source: %+v", rej)
	}
}

// unopenedSecrets is a store whose source look-up could not open the
// source's secret rows (a sealed row no key opens).
type unopenedSecrets struct{ store.Store }

// GetIngressSourceByName reads, then drops the secrets with an error.
func (s unopenedSecrets) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	is, err := s.Store.GetIngressSourceByName(ctx, orgID, name)
	if err == nil {
		is.Secrets, is.SecretsErr = nil, errors.New("webhook secret: cannot open")
	}
	return is, err
}

// TestUnopenedSecretsFailOnlyWhereNeeded: secrets the look-up could not
// open fail (500, no rejected record) only a route that verifies with
// them; a disabled source is still refused 404 and a source verified
// otherwise still accepts, as when the secrets were read apart.
func TestUnopenedSecretsFailOnlyWhereNeeded(t *testing.T) {
	st := teststore.SQLite(t)
	ctx := context.Background()
	for _, src := range []*store.Source{
		{ID: "s-hmac", Name: "hmac", VerificationMethod: VerifyHMACSHA256, Enabled: true},
		{ID: "s-none", Name: "none", VerificationMethod: VerifyNone, Enabled: true},
		{ID: "s-off", Name: "off", VerificationMethod: VerifyHMACSHA256},
	} {
		src.OrgID, src.Provider, src.RoutingKey, src.CreatedAt = "acme", provider.Generic, "generic:acme:"+src.ID, time.Now().UTC()
		if err := st.CreateSourceWithSettings(ctx, src, nil, []*store.SourceSecret{{Secret: secret}}); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/generic/{name}", NewIngress(unopenedSecrets{st}, nil, Options{}).Generic())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	body := []byte(`{"ref":"refs/heads/main"}`)
	post := func(name string) (int, Response) {
		return postRaw(t, srv.URL+"/webhook/acme/generic/"+name, body, map[string]string{HeaderSignature: sign(body),
			HeaderEventType: "push", HeaderDelivery: "d-" + name, "Content-Type": "application/json"})
	}
	if code, r := post("hmac"); code != http.StatusInternalServerError || r.Accepted {
		t.Fatalf("hmac source with unopened secrets: %d %+v, want 500", code, r)
	}
	if code, r := post("none"); code != http.StatusAccepted || !r.Accepted {
		t.Fatalf("unverified source: %d %+v, want 202", code, r)
	}
	if code, r := post("off"); code != http.StatusNotFound || r.Error != MsgSourceDisabled {
		t.Fatalf("disabled source: %d %+v, want 404 %q", code, r, MsgSourceDisabled)
	}
	if rej, _ := st.ListRejected(ctx, "s-hmac", 10); len(rej) != 0 {
		t.Fatalf("a store failure left rejected records: %+v", rej)
	}
}
