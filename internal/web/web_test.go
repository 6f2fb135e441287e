package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

func TestSignInSessionCookieAndHeaders(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	code, _, resp := c.get("/ui/runs")
	if code != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?next=") {
		t.Fatalf("anonymous runs page: %d %s", code, resp.Header.Get("Location"))
	}
	_, body, _ := c.get("/ui/login")
	csrf := csrfRe.FindStringSubmatch(body)[1]
	// A wrong token is refused and creates no session.
	code, body, _ = c.post("/ui/login", url.Values{"csrf": {csrf}, "token": {"kadm_nope"}})
	if code != http.StatusUnauthorized || !strings.Contains(body, "Invalid or expired token") {
		t.Fatalf("bad token: %d", code)
	}
	csrf = csrfRe.FindStringSubmatch(body)[1] // the form is issued anew
	code, _, resp = c.post("/ui/login", url.Values{"csrf": {csrf}, "token": {h.tokens[auth.RoleOwner]}})
	if code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", code)
	}
	var sc *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			sc = ck
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure || sc.Path != "/" {
		t.Fatalf("session cookie: %+v", sc)
	}
	if strings.Contains(sc.Value, h.tokens[auth.RoleOwner]) {
		t.Fatal("the cookie carries the token")
	}
	code, body, resp = c.get("/ui/runs")
	if code != 200 {
		t.Fatalf("runs page: %d", code)
	}
	for k, want := range map[string]string{"Content-Security-Policy": ContentSecurityPolicy, "X-Frame-Options": "DENY",
		"Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	mustNotContain(t, "runs page", body, h.tokens[auth.RoleOwner], "<script>", "style=")
	mustContain(t, "runs page", body, "owner-token", `<script src="/ui/static/live.js" defer></script>`)
}

func TestSecureCookieBehindHTTPS(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.PublicURL = "https://ci.example.com" })
	c := h.client()
	_, body, _ := c.get("/ui/login")
	csrf := csrfRe.FindStringSubmatch(body)[1]
	_, _, resp := c.post("/ui/login", url.Values{"csrf": {csrf}, "token": {h.tokens[auth.RoleOwner]}})
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie && !ck.Secure {
			t.Fatal("session cookie not Secure with an https public URL")
		}
	}
}

func TestLoginNeedsItsFormToken(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	code, _, _ := c.post("/ui/login", url.Values{"token": {h.tokens[auth.RoleOwner]}})
	if code != http.StatusForbidden {
		t.Fatalf("login without the form token: %d", code)
	}
	if code, _, _ := c.get("/ui/runs"); code != http.StatusSeeOther {
		t.Fatalf("a session was created: %d", code)
	}
}

func TestOpenRedirectRefused(t *testing.T) {
	for in, want := range map[string]string{"/ui/runs/x": "/ui/runs/x", "//evil.example/ui/": "/ui/runs",
		"https://evil.example": "/ui/runs", "/ui/\\evil": "/ui/runs", "": "/ui/runs",
		"/ui/../api/v1/admin/tokens": "/ui/runs", "/ui/..//evil.example": "/ui/runs", "/ui/\t/evil.example": "/ui/runs",
		"/ui/runs?branch=a/../b": "/ui/runs?branch=a/../b"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSessionEndsOnRevocationIdleAndAge(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAdmin])
	if err := h.st.RevokeAdminToken(context.Background(), h.tokenID[auth.RoleAdmin]); err != nil {
		t.Fatal(err)
	}
	code, _, resp := c.get("/ui/runs")
	if code != http.StatusSeeOther {
		t.Fatalf("revoked token's session still served: %d", code)
	}
	if sc := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(sc, SessionCookie+"=;") || !strings.Contains(sc, "Max-Age=0") {
		t.Fatalf("the ended session's cookie is not cleared: %q", sc)
	}

	c = h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	h.advance(29 * time.Minute)
	if code, _, _ := c.get("/ui/runs"); code != 200 {
		t.Fatalf("active session ended early: %d", code)
	}
	h.advance(31 * time.Minute)
	if code, _, _ := c.get("/ui/runs"); code != http.StatusSeeOther {
		t.Fatalf("idle session still served: %d", code)
	}

	c = h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	for i := 0; i < 30; i++ { // active all along, but older than 12 h
		h.advance(25 * time.Minute)
		c.get("/ui/runs")
	}
	if code, _, _ := c.get("/ui/runs"); code != http.StatusSeeOther {
		t.Fatalf("session past its absolute expiry still served: %d", code)
	}
}

func TestSignOut(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	csrf := c.signIn(h.tokens[auth.RoleOwner])
	if code, _, _ := c.post("/ui/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", code)
	}
	if code, _, _ := c.get("/ui/runs"); code != http.StatusSeeOther {
		t.Fatalf("signed-out session still served: %d", code)
	}
}

func TestCSRFRequiredOnEveryPost(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	csrf := c.signIn(h.tokens[auth.RoleOwner])
	for _, path := range []string{h.runURL() + "/cancel", h.runURL() + "/rerun", "/ui/held/x/decision", "/ui/logout"} {
		for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
			if code, body, _ := c.post(path, form); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("POST %s %v: %d", path, form, code)
			}
		}
	}
	if n := len(h.cancel.calls()); n != 0 {
		t.Fatalf("a forged POST cancelled: %v", h.cancel.calls())
	}
	if code, _, resp := c.post(h.runURL()+"/cancel", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther ||
		!strings.Contains(resp.Header.Get("Location"), "flash=cancelled") {
		t.Fatalf("cancel with the CSRF token: %d", code)
	}
	if got := h.cancel.calls(); len(got) != 1 || got[0] != h.runID+" by owner-token" {
		t.Fatalf("cancel calls: %v", got)
	}
	entries, err := h.st.ListAccessLog(context.Background(), store.AccessLogFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || (e.Action == "POST /api/v1/admin/runs/{runId}/cancel" && e.TokenID == h.tokenID[auth.RoleOwner])
	}
	if !found {
		t.Fatal("the UI cancel wrote no access-log row")
	}
}

func TestAuditorSeesNoActionsAndIsRefused(t *testing.T) {
	h := newHarness(t)
	held := &store.HeldRun{OrgID: "demo", RunID: h.runID, JobID: h.jobIDs[1], HoldType: hold.Security, QueueType: "job",
		HoldScope: hold.ScopeJob, Reason: hold.ReasonForkPR, ExpiresAt: time.Now().Add(time.Hour)}
	if ok, err := h.st.CreateHeldRun(context.Background(), held, nil); err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}
	c := h.client()
	csrf := c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.runURL())
	mustNotContain(t, "auditor run page", body, `id="cancel"`, `id="rerun"`)
	_, body, _ = c.get("/ui/held")
	mustContain(t, "auditor held page", body, "fork_pr")
	mustNotContain(t, "auditor held page", body, "Approve", `value="approve"`)
	// A hand-made POST with a valid session and CSRF token is still refused
	// by the permission table.
	code, body, _ := c.post("/ui/held/"+held.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}})
	if code != http.StatusForbidden || !strings.Contains(body, `does not have permission &#34;ci_trust.admin&#34;`) {
		t.Fatalf("auditor decision: %d %s", code, body)
	}
	if code, _, _ := c.post(h.runURL()+"/cancel", url.Values{"csrf": {csrf}}); code != http.StatusForbidden {
		t.Fatalf("auditor cancel: %d", code)
	}
	if got, _ := h.st.GetHeldRun(context.Background(), held.ID); got.Status != hold.Pending {
		t.Fatalf("hold decided by an auditor: %s", got.Status)
	}

	// An admin approves from the held page.
	a := h.client()
	csrf = a.signIn(h.tokens[auth.RoleAdmin])
	_, body, _ = a.get("/ui/held")
	mustContain(t, "admin held page", body, `value="approve"`)
	code, _, _ = a.post("/ui/held/"+held.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "comment": {"looks fine <b>"}})
	if code != http.StatusSeeOther {
		t.Fatalf("admin approve: %d", code)
	}
	got, _ := h.st.GetHeldRun(context.Background(), held.ID)
	if got.Status != hold.Approved {
		t.Fatalf("hold after approval: %s", got.Status)
	}
}

func TestRepositoryAndLogStringsAreInert(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	pages := []string{"/ui/runs", h.runURL(), h.jobURL(0), h.jobURL(0) + "?step=0&q=script"}
	for _, p := range pages {
		code, body, _ := c.get(p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		mustNotContain(t, p, body, "<img src=x", "<script>alert", "<b>bold</b>", "javascript:", "mallory<b>")
	}
	_, body, _ := c.get(h.runURL())
	mustContain(t, "run page", body, "build &lt;img src=x onerror=alert`1`&gt;", "fix: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;",
		"mallory&lt;b&gt;", `<svg class="graph"`, `class="node st-running"`)
	_, body, _ = c.get(h.jobURL(0) + "?step=0")
	mustContain(t, "job page", body, `&lt;script&gt;alert(&#39;log&#39;)&lt;/script&gt; <span class="a-f1">red</span>`, `id="L1"`, `href="#L1"`)
}

func TestJobPageShowsOutputsAndArtifacts(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.st.PutJobOutputs(ctx, h.jobIDs[0], map[string]string{"version": "1.2.3", "note": "<b>x</b>"}); err != nil {
		t.Fatal(err)
	}
	a := &store.Artifact{ID: "a-1", OrgID: "demo", RunID: h.runID, JobID: h.jobIDs[0], JobName: evilJob, Name: "dist",
		BlobKey: "k", SizeBytes: 42, SHA256: strings.Repeat("c", 64), CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()}
	if err := h.st.InsertArtifact(ctx, a, 100, 1<<30); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get(h.jobURL(0))
	mustContain(t, "job page", body, "<code>version</code>", "<code>1.2.3</code>", "&lt;b&gt;x&lt;/b&gt;",
		`href="/api/v1/admin/runs/`+h.runID+`/artifacts/dist"`, "42 bytes")
	_, body, _ = c.get(h.jobURL(1))
	mustNotContain(t, "another job's page", body, "1.2.3", "/artifacts/dist")
}

func TestScopedTokenSeesOnlyItsRuns(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	other := &store.Run{ID: "33333333-3333-3333-3333-333333333333", WorkflowName: "secret-wf", Status: status.RunSuccess, Provider: provider.Generic,
		RepoIdentifier: "other/repo", OrgID: "demo", CreatedAt: time.Now().UTC()}
	if err := h.st.CreateRun(ctx, other, nil); err != nil {
		t.Fatal(err)
	}
	plain := auth.NewAdminTokenPlaintext()
	tok := &store.AdminToken{ID: "scoped-1", Label: "scoped", Role: string(auth.RoleAdmin), TokenHash: auth.Hash(plain), CreatedAt: time.Now().UTC()}
	if err := h.st.CreateAdminTokenAudited(ctx, tok, "generic:demo:src-1", &store.AccessLogEntry{Action: "token.create"}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(plain)
	_, body, _ := c.get("/ui/runs")
	mustContain(t, "scoped runs", body, h.runID)
	mustNotContain(t, "scoped runs", body, "secret-wf")
	if code, _, _ := c.get("/ui/runs/" + other.ID); code != http.StatusForbidden {
		t.Fatalf("other key's run: %d", code)
	}
	if code, _, _ := c.get("/ui/runs/unknown-run"); code != http.StatusForbidden {
		t.Fatalf("unknown run for a scoped token: %d", code)
	}
	for _, p := range []string{"/ui/held", "/ui/agents", "/ui/settings"} {
		if code, _, _ := c.get(p); code != http.StatusForbidden {
			t.Errorf("%s for a scoped token: %d", p, code)
		}
	}
}

func TestRunsFiltersAndPages(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	base := time.Now().UTC()
	for i := 0; i < 30; i++ {
		r := &store.Run{ID: "44444444-0000-0000-0000-0000000000" + string(rune('a'+i/10)) + string(rune('0'+i%10)),
			WorkflowName: "nightly", Status: []status.Run{status.RunSuccess, status.RunFailed}[i%2], Provider: provider.Generic, RepoIdentifier: "demo/app",
			Ref: "refs/heads/release", OrgID: "demo", TriggerType: apitypes.TriggerSchedule, CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if err := h.st.CreateRun(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	_, body, _ := c.get("/ui/runs?workflow=nightly&status=failed&branch=release&trigger=schedule")
	if n := strings.Count(body, "<tr data-run-id="); n != 15 {
		t.Fatalf("filtered rows: %d", n)
	}
	mustNotContain(t, "filtered", body, "st-success")
	_, body, _ = c.get("/ui/runs")
	if n := strings.Count(body, "<tr data-run-id="); n != runsPageSize {
		t.Fatalf("first page rows: %d", n)
	}
	mustContain(t, "first page", body, "1–25 of 31", `rel="next"`)
	_, body, _ = c.get("/ui/runs?offset=25")
	if n := strings.Count(body, "<tr data-run-id="); n != 6 {
		t.Fatalf("second page rows: %d", n)
	}
	_, body, _ = c.get("/ui/runs?source=src-1")
	if n := strings.Count(body, "<tr data-run-id="); n != 1 {
		t.Fatalf("source filter rows: %d", n)
	}
}

// The run page lists the run's unexpired artifacts with their digests.
func TestRunPageListsArtifacts(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, a := range []*store.Artifact{
		{ID: "a1", OrgID: "demo", RunID: h.runID, JobID: "j", JobName: "build", Name: "kici-bin", BlobKey: "k1", SizeBytes: 1234,
			SHA256: strings.Repeat("ab", 32), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{ID: "a2", OrgID: "demo", RunID: h.runID, JobID: "j", JobName: "build", Name: "stale-docs", BlobKey: "k2", SizeBytes: 1,
			SHA256: strings.Repeat("cd", 32), CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)},
	} {
		if err := h.st.InsertArtifact(ctx, a, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleOwner])
	_, body, _ := c.get("/ui/runs/" + h.runID)
	mustContain(t, "run page", body, "kici-bin", strings.Repeat("ab", 32), "1234", "1.2 KiB", "kici-admin runs artifacts download "+h.runID)
	mustNotContain(t, "run page", body, "stale-docs")
}
