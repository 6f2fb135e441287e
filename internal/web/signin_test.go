package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/auth/idp"
	"kici.dev/kici/internal/store"
)

// withSignIn configures h's UI with providers (their callbacks under h's
// server) and the role rules.
func (h *harness) withSignIn(rules []auth.RoleRule, cfgs ...idp.ProviderConfig) {
	si := &SignIn{Roles: &auth.RoleMap{Rules: rules}}
	for _, c := range cfgs {
		si.Providers = append(si.Providers, idp.New(c, h.srv.URL+"/ui/login/"+c.Name+"/callback", nil))
	}
	h.ui.d.SignIn = si
}

// providerSignIn runs a provider sign-in in c to the end: the start page
// redirects to the provider, whose answer (a redirect back) is followed to
// the callback. It returns the callback's status and body.
func (c *client) providerSignIn(name, next string) (int, string) {
	c.h.t.Helper()
	code, body, resp := c.get("/ui/login/" + name + "?next=" + url.QueryEscape(next))
	if code != http.StatusSeeOther {
		c.h.t.Fatalf("start of the sign-in with %s: %d %s", name, code, body)
	}
	// The provider (no cookies of ours) answers with a redirect back.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	pr, err := noFollow.Get(resp.Header.Get("Location"))
	if err != nil {
		c.h.t.Fatal(err)
	}
	pr.Body.Close()
	back := pr.Header.Get("Location")
	if !strings.HasPrefix(back, c.h.srv.URL+"/ui/login/"+name+"/callback?") {
		c.h.t.Fatalf("the provider sent the browser to %q (status %d)", back, pr.StatusCode)
	}
	code, body, _ = c.get(strings.TrimPrefix(back, c.h.srv.URL))
	return code, body
}

func startMockOIDC(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func oidcConfig(m *mockoidc.MockOIDC) idp.ProviderConfig {
	return idp.ProviderConfig{Name: "sso", Kind: auth.ProviderOIDC, Label: "Company SSO", Issuer: m.Issuer(),
		ClientID: m.ClientID, ClientSecret: m.ClientSecret, Scopes: []string{"openid", "profile", "email", "groups"}}
}

// A person signs in through a real OpenID Connect provider (discovery,
// PKCE, nonce, a signed ID token): the group rule gives them auditor;
// their name shows, the access log records their identity, the session
// is valid through a second UI over the same database (another node),
// and revoking it ends it at once.
func TestSignInOIDC(t *testing.T) {
	h := newHarness(t)
	m := startMockOIDC(t)
	h.withSignIn([]auth.RoleRule{{Groups: []string{"sre"}, Role: auth.RoleAuditor}}, oidcConfig(m))
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1001", PreferredUsername: "jane", Email: "jane@example.com", Groups: []string{"dev", "sre"}})

	c := h.client()
	_, login, _ := c.get("/ui/login")
	mustContain(t, "sign-in page", login, `id="signin-sso"`, "Company SSO")
	code, body := c.providerSignIn("sso", "/ui/held")
	if code != http.StatusOK || !strings.Contains(body, `url=/ui/held`) {
		t.Fatalf("callback: %d %s", code, body)
	}
	code, runs, _ := c.get("/ui/runs")
	host := strings.TrimPrefix(m.Addr(), "http://")
	id := "oidc:" + host + ":u-1001"
	if code != 200 {
		t.Fatalf("runs after sign-in: %d", code)
	}
	mustContain(t, "runs page", runs, ">jane<", `title="`+id+`"`, ">auditor<")

	log, err := h.st.ListAccessLog(context.Background(), store.AccessLogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 || log[len(log)-1].Action != "web.sign_in" && log[0].Action != "web.sign_in" {
		t.Fatalf("no sign-in row in the access log: %+v", log)
	}
	found := false
	for _, e := range log {
		if e.Action == "web.sign_in" && e.TokenID == id && e.TokenLabel == "jane" {
			found = true
		}
	}
	if !found {
		t.Fatalf("sign-in row without the person's identity: %+v", log)
	}

	// Another node: a second UI over the same database.
	ui2, err := New(h.ui.d)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ui2.Mount(mux)
	node2 := httptest.NewServer(mux)
	defer node2.Close()
	u, _ := url.Parse(h.srv.URL)
	req, _ := http.NewRequest("GET", node2.URL+"/ui/runs", nil)
	for _, ck := range c.hc.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("node 2 with node 1's session: %d", resp.StatusCode)
	}

	sessions, _ := h.st.ListWebSessions(context.Background(), id)
	if len(sessions) != 1 || sessions[0].Role != string(auth.RoleAuditor) || sessions[0].Kind != store.WebSessionPerson {
		t.Fatalf("stored sessions: %+v", sessions)
	}
	if n, err := h.st.DeleteWebSessionsOf(context.Background(), id); n != 1 || err != nil {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if code, _, resp := c.get("/ui/runs"); code != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Fatalf("after revoke: %d %s", code, resp.Header.Get("Location"))
	}
}

// A person no rule maps is refused with a page naming their identity; a
// callback whose state is not this browser's is refused and counted as a
// failure.
func TestSignInRefusals(t *testing.T) {
	h := newHarness(t)
	m := startMockOIDC(t)
	h.withSignIn([]auth.RoleRule{{Groups: []string{"sre"}, Role: auth.RoleAdmin}}, oidcConfig(m))
	m.QueueUser(&mockoidc.MockUser{Subject: "u-7", PreferredUsername: "mallory", Groups: []string{"sales"}})
	c := h.client()
	code, body := c.providerSignIn("sso", "/ui/runs")
	host := strings.TrimPrefix(m.Addr(), "http://")
	if code != http.StatusForbidden {
		t.Fatalf("unmapped person: %d %s", code, body)
	}
	mustContain(t, "refusal", body, "no role is mapped", "oidc:"+host+":u-7", "sales")
	if code, _, _ := c.get("/ui/runs"); code != http.StatusSeeOther {
		t.Fatalf("refused person reached the runs page: %d", code)
	}
	if s, _ := h.st.ListWebSessions(context.Background(), ""); len(s) != 0 {
		t.Fatalf("a refused person got a session: %+v", s)
	}

	// A callback with a forged state (another browser's sign-in).
	c2 := h.client()
	c2.get("/ui/login/sso?next=/ui/runs")
	if code, body, _ := c2.get("/ui/login/sso/callback?code=x&state=forged"); code != http.StatusBadRequest || !strings.Contains(body, "expired or was not started") {
		t.Fatalf("forged state: %d %s", code, body)
	}
}

// fakeGitHub is GitHub's OAuth app flow and the three API calls sign-in
// makes; it checks the PKCE verifier against the challenge (S256).
type fakeGitHub struct {
	mu         sync.Mutex
	challenge  map[string]string // code -> challenge
	srv        *httptest.Server
	login      string
	orgs       []string
	teams      [][2]string
	exchangeOK bool
}

func newFakeGitHub(t *testing.T, login string) *fakeGitHub {
	f := &fakeGitHub{challenge: map[string]string{}, login: login}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "gh-client" {
			http.Error(w, "bad authorize request", 400)
			return
		}
		f.mu.Lock()
		f.challenge["code-1"] = q.Get("code_challenge")
		f.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=code-1&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		ch := f.challenge[r.PostForm.Get("code")]
		f.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		id, secret, _ := r.BasicAuth()
		if id == "" {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if ch == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != ch || id != "gh-client" || secret != "gh-secret" {
			w.Header().Set("Content-Type", "application/json")
			if _, err := w.Write([]byte(`{"error":"bad_verification_code"}`)); err != nil {
				t.Error(err)
			}
			return
		}
		f.mu.Lock()
		f.exchangeOK = true
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write([]byte(`{"access_token":"gho_test","token_type":"bearer","scope":"read:user,read:org"}`)); err != nil {
			t.Error(err)
		}
	})
	api := func(path string, v func() any) {
		mux.HandleFunc("GET /api"+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer gho_test" {
				http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(v())
		})
	}
	api("/user", func() any { return map[string]any{"login": f.login, "name": "Octo Cat", "id": 1} })
	api("/user/orgs", func() any {
		var out []map[string]string
		for _, o := range f.orgs {
			out = append(out, map[string]string{"login": o})
		}
		return out
	})
	api("/user/teams", func() any {
		var out []map[string]any
		for _, tm := range f.teams {
			out = append(out, map[string]any{"slug": tm[1], "organization": map[string]string{"login": tm[0]}})
		}
		return out
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// A person signs in with GitHub OAuth (PKCE checked by the fake): an
// org/team rule maps them to admin, and their identity is github:<login>.
func TestSignInGitHub(t *testing.T) {
	h := newHarness(t)
	gh := newFakeGitHub(t, "octocat")
	gh.orgs, gh.teams = []string{"acme"}, [][2]string{{"acme", "ci-admins"}}
	h.withSignIn([]auth.RoleRule{
		{Provider: auth.ProviderGitHub, Groups: []string{"acme/ci-admins"}, Role: auth.RoleAdmin},
	}, idp.ProviderConfig{Name: "github", Kind: auth.ProviderGitHub, Label: "GitHub", URL: gh.srv.URL, APIURL: gh.srv.URL + "/api",
		ClientID: "gh-client", ClientSecret: "gh-secret"})
	c := h.client()
	if code, body := c.providerSignIn("github", "/ui/runs"); code != 200 {
		t.Fatalf("callback: %d %s", code, body)
	}
	_, runs, _ := c.get("/ui/runs")
	mustContain(t, "runs page", runs, ">Octo Cat<", `title="github:octocat"`, ">admin<")
	if !gh.exchangeOK {
		t.Fatal("the code exchange never passed the PKCE check")
	}

	// Without the team, the same person is refused.
	gh.teams = nil
	c2 := h.client()
	if code, body := c2.providerSignIn("github", "/ui/runs"); code != http.StatusForbidden || !strings.Contains(body, "github:octocat") {
		t.Fatalf("person outside the team: %d %s", code, body)
	}
}

// Role mapping decides who approves: on a reviewer hold naming
// "oidc:<host>:rev-1" (a context's requiredReviewers), that person — an
// auditor by role — approves, recorded under their identity; another
// signed-in auditor is refused and the hold stays pending.
func TestSignInReviewerApproves(t *testing.T) {
	h := newHarness(t)
	m := startMockOIDC(t)
	h.withSignIn([]auth.RoleRule{{Groups: []string{"dev"}, Role: auth.RoleAuditor}}, oidcConfig(m))
	host := strings.TrimPrefix(m.Addr(), "http://")
	reviewer := "oidc:" + host + ":rev-1"
	held := &store.HeldRun{OrgID: "demo", RunID: h.runID, JobID: h.jobIDs[1], HoldType: hold.Reviewer, QueueType: "job",
		HoldScope: hold.ScopeJob, Reason: "required_reviewers", Clauses: []store.ApprovalClause{{Kind: "user", Value: reviewer}},
		ExpiresAt: time.Now().Add(time.Hour)}
	if ok, err := h.st.CreateHeldRun(context.Background(), held, nil); err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}

	m.QueueUser(&mockoidc.MockUser{Subject: "other-2", PreferredUsername: "olga", Groups: []string{"dev"}})
	o := h.client()
	o.providerSignIn("sso", "/ui/held")
	csrf := o.csrf("/ui/held")
	code, body, _ := o.post("/ui/held/"+held.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}})
	if code != http.StatusConflict || !strings.Contains(body, "is not a reviewer of this hold") {
		t.Fatalf("another person's approval: %d %s", code, body)
	}
	if got, _ := h.st.GetHeldRun(context.Background(), held.ID); got.Status != hold.Pending {
		t.Fatalf("hold decided by a non-reviewer: %s", got.Status)
	}

	m.QueueUser(&mockoidc.MockUser{Subject: "rev-1", PreferredUsername: "rita", Groups: []string{"dev"}})
	r := h.client()
	r.providerSignIn("sso", "/ui/held")
	_, body, _ = r.get("/ui/held")
	mustContain(t, "reviewer's held page", body, `value="approve"`)
	csrf = r.csrf("/ui/held")
	if code, body, _ := r.post("/ui/held/"+held.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}}); code != http.StatusSeeOther {
		t.Fatalf("reviewer's approval: %d %s", code, body)
	}
	got, _ := h.st.GetHeldRun(context.Background(), held.ID)
	if got.Status != hold.Approved || len(got.Approvals) != 1 || got.Approvals[0].Approver != reviewer {
		t.Fatalf("hold after the reviewer's approval: %s %+v", got.Status, got.Approvals)
	}
	log, _ := h.st.ListAccessLog(context.Background(), store.AccessLogFilter{Action: "held_run.approve"})
	if len(log) != 1 || log[0].TokenID != reviewer || !strings.Contains(log[0].Detail, "approve by "+reviewer) {
		t.Fatalf("access log of the approval: %+v", log)
	}
}
