package webhook

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/testutil/fixtures"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/testutil/teststore"
)

var fixtureDir = fixtures.GitHubWebhooksDir()

type ghEnv struct {
	st        store.Store
	srv       *httptest.Server
	mu        sync.Mutex
	submitted []string
	src       *store.Source
	clock     time.Time
}

func newGHEnv(t *testing.T, opts Options, set *store.SourceSettings, secrets ...string) *ghEnv {
	t.Helper()
	e := &ghEnv{st: teststore.SQLite(t), clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	e.src = &store.Source{ID: uuid.NewString(), OrgID: "acme", Name: "gh", Provider: provider.GitHub, RoutingKey: "github:4242",
		VerificationMethod: VerifyHMACSHA256, Enabled: true}
	var secs []*store.SourceSecret
	for _, s := range secrets {
		secs = append(secs, &store.SourceSecret{Secret: s})
	}
	if err := e.st.CreateSourceWithSettings(context.Background(), e.src, set, secs); err != nil {
		t.Fatal(err)
	}
	opts.Now = func() time.Time {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.clock
	}
	in := NewIngress(e.st, SubmitFunc(func(d *store.Delivery) {
		id := d.ID
		e.mu.Lock()
		e.submitted = append(e.submitted, id)
		e.mu.Unlock()
	}), opts)
	mux := http.NewServeMux()
	mux.Handle("POST /webhook/{orgId}/github/{sourceId}", in.GitHub())
	mux.Handle("POST /webhook/{orgId}/generic/{name}", in.Generic())
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func signWith(key string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (e *ghEnv) postGH(t *testing.T, event, delivery string, body []byte, hdr map[string]string) (int, Response, http.Header) {
	t.Helper()
	std := map[string]string{"Content-Type": "application/json"}
	if event != "" {
		std[HeaderGitHubEvent] = event
	}
	if delivery != "" {
		std[HeaderGitHubDelivery] = delivery
	}
	return postWebhook(t, e.srv.URL+"/webhook/acme/github/"+e.src.ID, body, std, hdr)
}

func (e *ghEnv) traces(t *testing.T) (deliveries, logEntries, rejected int) {
	t.Helper()
	ctx := context.Background()
	ds, err := e.st.ListUnprocessedDeliveries(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := e.st.ListEventLog(ctx, store.EventLogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	rej, err := e.st.ListRejected(ctx, e.src.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(ds), n, len(rej)
}

// TestGitHubEveryFixtureAcceptedOnceAndReplayIsDuplicate posts every real
// GitHub payload with a valid signature (202), then replays it (200
// duplicate), and checks the stored delivery and its gzipped event-log
// payload are byte-for-byte the body.
func TestGitHubEveryFixtureAcceptedOnceAndReplayIsDuplicate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil || len(files) < 300 {
		t.Fatalf("fixtures: %d files, err %v (want the ~330 GitHub samples)", len(files), err)
	}
	e := newGHEnv(t, Options{}, &store.SourceSettings{RateLimitRPM: -1}, "gh-secret")
	ctx := context.Background()
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		event := strings.SplitN(filepath.Base(f), ".", 2)[0]
		del := uuid.NewString()
		hdr := map[string]string{HeaderHubSignature: signWith("gh-secret", body)}
		code, r, _ := e.postGH(t, event, del, body, hdr)
		if code != http.StatusAccepted || !r.Accepted || r.DeliveryID != "github:4242:"+del {
			t.Fatalf("%s: %d %+v, want 202 accepted", filepath.Base(f), code, r)
		}
		code, r, _ = e.postGH(t, event, del, body, hdr)
		if code != http.StatusOK || !r.Duplicate {
			t.Fatalf("%s replay: %d %+v, want 200 duplicate", filepath.Base(f), code, r)
		}
		d, err := e.st.GetDelivery(ctx, "github:4242:"+del)
		if err != nil || d.Event != event || !bytes.Equal(d.Payload, body) || d.SourceID != e.src.ID || d.OrgID != "acme" {
			t.Fatalf("%s: stored delivery %v (err %v)", filepath.Base(f), d != nil, err)
		}
		le, err := e.st.GetEventLog(ctx, "acme", d.ID)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(le.PayloadGz))
		if err != nil {
			t.Fatalf("%s: event-log payload not gzip: %v", f, err)
		}
		plain, _ := io.ReadAll(zr)
		if !bytes.Equal(plain, body) || le.Status != store.EventLogReceived || le.Event != event || le.PayloadSizeBytes != int64(len(body)) {
			t.Fatalf("%s: event-log entry %+v", filepath.Base(f), le)
		}
	}
	if len(e.submitted) != len(files) {
		t.Fatalf("submitted %d deliveries, want %d (one per fixture, none for replays)", len(e.submitted), len(files))
	}
	_, dups, _ := e.st.ListEventLog(ctx, store.EventLogFilter{Status: store.EventLogDuplicate})
	if dups != len(files) {
		t.Fatalf("duplicate entries = %d, want %d", dups, len(files))
	}
	// The event log carries the repository and action from the body.
	list, _, _ := e.st.ListEventLog(ctx, store.EventLogFilter{Event: "pull_request", Action: "opened", Limit: 1})
	if len(list) != 1 || list[0].RepoIdentifier == "" {
		t.Fatalf("pull_request opened entry = %+v", list)
	}
}

// TestGitHubBadSignatureLeavesOnlyARejectedRecord: 401, no delivery, no
// event-log entry, nothing submitted, one rejected record.
func TestGitHubBadSignatureLeavesOnlyARejectedRecord(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "gh-secret")
	body, err := os.ReadFile(filepath.Join(fixtureDir, "push.none.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{signWith("wrong", body), "", "sha256=zz", "sha1=" + strings.Repeat("0", 40), signWith("gh-secret", append(body, ' '))} {
		code, r, _ := e.postGH(t, "push", uuid.NewString(), body, map[string]string{HeaderHubSignature: sig})
		if code != http.StatusUnauthorized || r.Accepted {
			t.Fatalf("signature %q: %d %+v, want 401", sig, code, r)
		}
	}
	d, l, rej := e.traces(t)
	if d != 0 || l != 0 || rej != 5 || len(e.submitted) != 0 {
		t.Fatalf("after bad signatures: deliveries %d, event-log %d, rejected %d, submitted %d; want 0 0 5 0", d, l, rej, len(e.submitted))
	}
	recs, _ := e.st.ListRejected(context.Background(), e.src.ID, 1)
	if recs[0].StatusCode != 401 || recs[0].Reason != "invalid signature" || recs[0].Route != "github" || recs[0].PayloadHash == "" {
		t.Fatalf("rejected record = %+v", recs[0])
	}
}

// TestGitHubSecretRotation: with two active secrets either signature is
// accepted; after revoking the old one, only the new one is.
func TestGitHubSecretRotation(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "old-secret")
	ctx := context.Background()
	if err := e.st.AddSourceSecret(ctx, &store.SourceSecret{SourceID: e.src.ID, Secret: "new-secret"}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	for _, key := range []string{"old-secret", "new-secret"} {
		if code, r, _ := e.postGH(t, "ping", uuid.NewString(), body, map[string]string{HeaderHubSignature: signWith(key, body)}); code != 202 {
			t.Fatalf("signed with %s during rotation: %d %+v", key, code, r)
		}
	}
	secs, _ := e.st.ListSourceSecrets(ctx, e.src.ID, true)
	for _, s := range secs {
		if s.Secret == "old-secret" {
			if err := e.st.RevokeSourceSecret(ctx, e.src.ID, s.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, _, _ := e.postGH(t, "ping", uuid.NewString(), body, map[string]string{HeaderHubSignature: signWith("old-secret", body)}); code != 401 {
		t.Fatalf("revoked secret: %d, want 401", code)
	}
	if code, _, _ := e.postGH(t, "ping", uuid.NewString(), body, map[string]string{HeaderHubSignature: signWith("new-secret", body)}); code != 202 {
		t.Fatalf("new secret after revoke: %d, want 202", code)
	}
}

// TestGitHubStatusCodes walks the GitHub route's answers one by one.
func TestGitHubStatusCodes(t *testing.T) {
	e := newGHEnv(t, Options{MaxGitHubPayloadBytes: 64}, &store.SourceSettings{RateLimitRPM: 3}, "k")
	small := []byte(`{"action":"x"}`)
	good := map[string]string{HeaderHubSignature: signWith("k", small)}
	big := bytes.Repeat([]byte(" "), 65)
	big[0] = '{'
	big[64] = '}'

	cases := []struct {
		name   string
		event  string
		del    string
		body   []byte
		hdr    map[string]string
		status int
	}{
		{"over cap", "push", "d1", big, map[string]string{HeaderHubSignature: signWith("k", big)}, 413},
		{"missing event", "", "d2", small, good, 400},
		{"missing delivery", "push", "", small, good, 400},
		{"target type not integration", "push", "d3", small, map[string]string{HeaderHubSignature: good[HeaderHubSignature], HeaderHookTargetType: "repository", HeaderHookTargetID: "4242"}, 400},
		{"target id of another app", "push", "d4", small, map[string]string{HeaderHubSignature: good[HeaderHubSignature], HeaderHookTargetType: "integration", HeaderHookTargetID: "99"}, 400},
		{"not a JSON object", "push", "d5", []byte(`[1]`), map[string]string{HeaderHubSignature: signWith("k", []byte(`[1]`))}, 400},
		{"app headers match", "push", "d6", small, map[string]string{HeaderHubSignature: good[HeaderHubSignature], HeaderHookTargetType: "integration", HeaderHookTargetID: "4242"}, 202},
		{"third within budget (the bad JSON above counted)", "push", "d7", small, good, 202},
		{"rate limited", "push", "d8", small, good, 429},
	}
	for _, c := range cases {
		code, r, h := e.postGH(t, c.event, c.del, c.body, c.hdr)
		if code != c.status {
			t.Fatalf("%s: %d %+v, want %d", c.name, code, r, c.status)
		}
		if code == 429 && h.Get("Retry-After") != "20" {
			t.Fatalf("429 Retry-After = %q, want 20 (3 rpm ⇒ one token per 20 s)", h.Get("Retry-After"))
		}
	}
	// The budget comes back with time.
	e.mu.Lock()
	e.clock = e.clock.Add(31 * time.Second)
	e.mu.Unlock()
	if code, _, _ := e.postGH(t, "push", "d9", small, good); code != 202 {
		t.Fatalf("after 31 s: %d, want 202", code)
	}
	// Unknown source, another org's path, a generic source's id: 404.
	for _, path := range []string{"/webhook/acme/github/" + uuid.NewString(), "/webhook/other/github/" + e.src.ID} {
		req, _ := http.NewRequest("POST", e.srv.URL+path, bytes.NewReader(small))
		req.Header.Set(HeaderGitHubEvent, "push")
		req.Header.Set(HeaderGitHubDelivery, "x")
		req.Header.Set(HeaderHubSignature, good[HeaderHubSignature])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("POST %s: %d, want 404", path, resp.StatusCode)
		}
	}
	_, _, rej := e.traces(t)
	if rej != 7 {
		t.Fatalf("rejected records = %d, want 7 (one 413, five 400s, one 429)", rej)
	}
}

// TestGitHubNoSecretIs422 covers a misconfigured source.
func TestGitHubNoSecretIs422(t *testing.T) {
	e := newGHEnv(t, Options{}, nil)
	body := []byte(`{}`)
	if code, _, _ := e.postGH(t, "ping", "d", body, map[string]string{HeaderHubSignature: signWith("", body)}); code != 422 {
		t.Fatalf("no secret: %d, want 422", code)
	}
}

// TestGitHubConcurrentReplaysAcceptOnce: 100 concurrent posts of one
// delivery ⇒ one 202, 99 × 200 duplicate, one submit, one delivery.
func TestGitHubConcurrentReplaysAcceptOnce(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "k")
	body, err := os.ReadFile(filepath.Join(fixtureDir, "pull_request.opened.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{HeaderHubSignature: signWith("k", body)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := e.postGH(t, "pull_request", "same-delivery", body, hdr)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[202] != 1 || codes[200] != 99 || len(e.submitted) != 1 {
		t.Fatalf("codes %v, submitted %d; want one 202, 99 × 200, one submit", codes, len(e.submitted))
	}
	d, l, _ := e.traces(t)
	if d != 1 || l != 100 {
		t.Fatalf("deliveries %d, event-log entries %d; want 1 and 100 (1 primary + 99 duplicates)", d, l)
	}
}

// TestGenericVerificationMethods covers bearer_token (custom header too),
// ip_allowlist, none, the per-source cap and rotation on a generic source.
func TestGenericVerificationMethods(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "k")
	ctx := context.Background()
	mk := func(name, method string, set *store.SourceSettings, secrets ...string) {
		src := &store.Source{ID: uuid.NewString(), OrgID: "acme", Name: name, Provider: provider.Generic, RoutingKey: "generic:acme:" + name,
			VerificationMethod: method, Enabled: true}
		var secs []*store.SourceSecret
		for _, s := range secrets {
			secs = append(secs, &store.SourceSecret{Secret: s})
		}
		if err := e.st.CreateSourceWithSettings(ctx, src, set, secs); err != nil {
			t.Fatal(err)
		}
	}
	mk("bearer", VerifyBearerToken, nil, "tok-a", "tok-b")
	mk("apikey", VerifyBearerToken, &store.SourceSettings{TokenHeader: "X-Api-Key"}, "key-1")
	mk("ips", VerifyIPAllowlist, &store.SourceSettings{IPAllowlist: []string{"127.0.0.1"}})
	mk("ips-other", VerifyIPAllowlist, &store.SourceSettings{IPAllowlist: []string{"10.9.9.9"}})
	mk("open", VerifyNone, &store.SourceSettings{MaxPayloadBytes: 10})
	mk("hmac", VerifyHMACSHA256, &store.SourceSettings{SignatureHeader: "X-Sig"}, "h1", "h2")
	body := []byte(`{"a":1}`)
	cases := []struct {
		name   string
		hdr    map[string]string
		body   []byte
		status int
	}{
		{"bearer", map[string]string{"Authorization": "Bearer tok-b"}, body, 202},
		{"bearer", map[string]string{"Authorization": "Bearer tok-c"}, []byte(`{"b":1}`), 401},
		{"bearer", map[string]string{"Authorization": "tok-a"}, []byte(`{"b":2}`), 401},
		{"apikey", map[string]string{"X-Api-Key": "key-1"}, body, 202},
		{"apikey", map[string]string{"Authorization": "Bearer key-1"}, []byte(`{"b":3}`), 401},
		{"ips", nil, body, 202},
		{"ips-other", nil, body, 401},
		{"open", nil, []byte(`{"a":12345}`), 413},
		{"open", nil, []byte(`{"a":1}`), 202},
		{"hmac", map[string]string{"X-Sig": signWith("h2", body)}, body, 202},
		{"hmac", map[string]string{HeaderSignature: signWith("h1", []byte(`{"c":1}`))}, []byte(`{"c":1}`), 401},
	}
	for i, c := range cases {
		req, _ := http.NewRequest("POST", e.srv.URL+"/webhook/acme/generic/"+c.name, bytes.NewReader(c.body))
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("case %d %s: %d %s, want %d", i, c.name, resp.StatusCode, b, c.status)
		}
	}
	// A GitHub source is not reachable through the generic route.
	req, _ := http.NewRequest("POST", e.srv.URL+"/webhook/acme/generic/gh", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("github source via generic route: %d, want 404", resp.StatusCode)
	}
	_ = fmt.Sprint
}

func TestRateLimiterRefill(t *testing.T) {
	now := time.Unix(0, 0)
	l := NewRateLimiter(func() time.Time { return now })
	for i := 0; i < 60; i++ {
		if ok, _ := l.Allow("s", 60); !ok {
			t.Fatalf("request %d of a 60 rpm budget refused", i+1)
		}
	}
	ok, wait := l.Allow("s", 60)
	if ok || wait != time.Second {
		t.Fatalf("61st: ok=%v wait=%v; want refused, 1s", ok, wait)
	}
	now = now.Add(2 * time.Second)
	for i := 0; i < 2; i++ {
		if ok, _ := l.Allow("s", 60); !ok {
			t.Fatalf("after 2 s, request %d refused", i+1)
		}
	}
	if ok, _ := l.Allow("s", 60); ok {
		t.Fatal("third request after 2 s accepted")
	}
	if ok, _ := l.Allow("other", 60); !ok {
		t.Fatal("budgets are per key")
	}
	if ok, _ := l.Allow("u", -1); !ok {
		t.Fatal("negative rpm is unlimited")
	}
}

// A universal-git source reads its preset's event and delivery headers.
func TestUniversalGitSourceHeaders(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "k")
	ctx := context.Background()
	src := &store.Source{ID: uuid.NewString(), OrgID: "acme", Name: "gitea", Provider: provider.Generic, RoutingKey: "generic:acme:gitea",
		VerificationMethod: VerifyNone, Enabled: true}
	if err := e.st.CreateSourceWithSettings(ctx, src, &store.SourceSettings{Git: &store.GitConfig{Preset: "gitea", GitURLTemplate: "https://g/{repo}.git"}}, nil); err != nil {
		t.Fatal(err)
	}
	post := func(hdr map[string]string) (int, Response) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/webhook/acme/generic/gitea", strings.NewReader(`{"ref":"refs/heads/main"}`))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r Response
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return resp.StatusCode, r
	}
	if code, r := post(map[string]string{"X-Event-Type": "push"}); code != 400 || !strings.Contains(r.Error, "X-Gitea-Event") {
		t.Fatalf("without X-Gitea-Event: %d %+v", code, r)
	}
	code, r := post(map[string]string{"X-Gitea-Event": "push", "X-Gitea-Delivery": "g-1"})
	if code != 202 || r.DeliveryID != "generic:acme:gitea:g-1" {
		t.Fatalf("gitea push: %d %+v", code, r)
	}
	d, err := e.st.GetDelivery(ctx, r.DeliveryID)
	if err != nil || d.Event != "push" {
		t.Fatalf("delivery %+v %v", d, err)
	}
}
