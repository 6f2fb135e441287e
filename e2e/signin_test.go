package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// startSignInCluster starts n orchestrators on one PostgreSQL database
// whose sign-in file offers provider "sso" (the OpenID Connect provider
// m) and maps group "sre" to auditor; KICI_PUBLIC_URL is node 0.
func startSignInCluster(t *testing.T, n int, m *mockoidc.MockOIDC) *clusterHarness {
	t.Helper()
	cfg := writeSignInConfig(t, m, "  - groups: [sre]\n    role: auditor\n")
	c := &clusterHarness{DatabaseURL: pgtest.URL(t)}
	for i := 0; i < n; i++ {
		c.dirs, c.ports, c.Nodes = append(c.dirs, t.TempDir()), append(c.ports, freePort(t)), append(c.Nodes, nil)
	}
	c.env = []string{"KICI_DATABASE_URL=" + c.DatabaseURL, "KICI_SECRET_KEY=" + haSecretKey,
		"KICI_WEB_SIGNIN_CONFIG=" + cfg, fmt.Sprintf("KICI_PUBLIC_URL=http://127.0.0.1:%d", c.ports[0])}
	for i := range c.Nodes {
		c.Start(t, i)
	}
	return c
}

// TestSignInOIDCInChromium signs a person in through a real OpenID
// Connect provider in headless Chromium: the role map makes them an
// auditor, the header shows their name and identity, the session made on
// node 1 is valid on node 2 and after node 1 restarts, `kici-admin
// session revoke` ends it at once, and a person no rule maps gets the
// refusal page.
func TestSignInOIDCInChromium(t *testing.T) {
	chromiumPath(t)
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	c := startSignInCluster(t, 2, m)
	n1, n2 := c.Nodes[0].url, c.Nodes[1].url
	id := "oidc:" + strings.TrimPrefix(m.Addr(), "http://") + ":u-1001"

	m.QueueUser(&mockoidc.MockUser{Subject: "u-1001", PreferredUsername: "jane", Email: "jane@example.com", Groups: []string{"dev", "sre"}})
	b := newBrowser(t, n1, "signin")
	b.do("sign in through the provider",
		chromedp.Navigate(n1+"/ui/runs"),
		chromedp.WaitVisible(chromedp.ID("signin-sso")),
		chromedp.Click(chromedp.ID("signin-sso")),
		chromedp.WaitVisible(chromedp.ID("runs")))
	if who := b.text("#who"); who != "jane" {
		t.Fatalf("header shows %q, want jane", who)
	}
	if title := js[string](b, `document.getElementById("who").title`); title != id {
		t.Fatalf("header identity %q, want %q", title, id)
	}
	if role := b.text(".who .role"); role != "auditor" {
		t.Fatalf("role %q, want auditor", role)
	}

	b.do("node 2 with node 1's session", chromedp.Navigate(n2+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs")))
	if who := b.text("#who"); who != "jane" {
		t.Fatalf("node 2 shows %q", who)
	}

	c.Stop(t, 0)
	c.Start(t, 0)
	b.do("node 1 after its restart", chromedp.Navigate(n1+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("runs")))

	if out := c.Nodes[1].admin(t, "session", "list", "--user", id); !strings.Contains(out, id) || !strings.Contains(out, "auditor") {
		t.Fatalf("session list:\n%s", out)
	}
	if out := c.Nodes[1].admin(t, "session", "revoke", "--user", id); !strings.Contains(out, "1 session(s)") {
		t.Fatalf("session revoke: %s", out)
	}
	b.do("signed out by the revoke", chromedp.Navigate(n1+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("login-form")))

	m.QueueUser(&mockoidc.MockUser{Subject: "u-666", PreferredUsername: "mallory", Groups: []string{"sales"}})
	b.do("an unmapped person", chromedp.Click(chromedp.ID("signin-sso")), chromedp.WaitVisible(chromedp.ID("error-message")))
	body := b.text("#error-message")
	for _, want := range []string{"no role is mapped", "mallory", "oidc:" + strings.TrimPrefix(m.Addr(), "http://") + ":u-666", "sales"} {
		if !strings.Contains(body, want) {
			t.Fatalf("refusal page lacks %q:\n%s", want, body)
		}
	}
	wait.For(t, 5*time.Second, "no session of the refused person", func() bool {
		return !strings.Contains(c.Nodes[0].admin(t, "session", "list"), "u-666")
	})
}

// writeSignInConfig writes a sign-in file offering the OpenID Connect
// provider m as "sso", with rules, and returns its path.
func writeSignInConfig(t *testing.T, m *mockoidc.MockOIDC, rules string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "signin.yaml")
	doc := fmt.Sprintf(`providers:
  - name: sso
    kind: oidc
    label: Company SSO
    issuer: %s
    clientId: %s
    clientSecret: %s
    scopes: [openid, profile, email, groups]
roles:
%s`, m.Issuer(), m.ClientID, m.ClientSecret, rules)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// signInSSO signs b in through the provider "sso" as the user queued
// at m.
func (b *browser) signInSSO(m *mockoidc.MockOIDC, u *mockoidc.MockUser) {
	b.t.Helper()
	m.QueueUser(u)
	b.do("sign in as "+u.PreferredUsername,
		chromedp.Navigate(b.base+"/ui/runs"),
		chromedp.WaitVisible(chromedp.ID("signin-sso")),
		chromedp.Click(chromedp.ID("signin-sso")),
		chromedp.WaitVisible(chromedp.ID("runs")))
}

// TestSignInReviewerApprovesInChromium: a job bound to a context whose
// requiredReviewers names an OpenID Connect identity is held; another
// signed-in person (an auditor by the role map) is refused, the named
// reviewer — also an auditor — approves from the held-runs page, and the
// run proceeds; the hold and the access log record the reviewer's
// identity.
func TestSignInReviewerApprovesInChromium(t *testing.T) {
	chromiumPath(t)
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	reviewer := "oidc:" + strings.TrimPrefix(m.Addr(), "http://") + ":rev-1"
	cfg := writeSignInConfig(t, m, "  - groups: [dev]\n    role: auditor\n")
	port := freePort(t)
	o := startOrchestratorAt(t, t.TempDir(), port, "KICI_WEB_SIGNIN_CONFIG="+cfg, fmt.Sprintf("KICI_PUBLIC_URL=http://127.0.0.1:%d", port))
	o.admin(t, "context", "create", "--org", "acme", "--name", "release", "--required-reviewers", reviewer)
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, ".kici/workflows/deploy.yaml"), heldWorkflow)
	run(t, repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "deploy")
	sourceID := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "web", "--quiet")
	delivery := o.admin(t, "source", "trigger-local", sourceID, "--quiet")
	var deployRun string
	var holds []heldRunRow
	wait.For(t, 60*time.Second, "the deploy job held", func() bool {
		var list struct {
			Runs []runView `json:"runs"`
		}
		o.get(t, "/api/v1/admin/runs?deliveryId="+delivery, &list)
		if len(list.Runs) == 1 {
			deployRun = list.Runs[0].RunID
			holds = o.heldRuns(t, deployRun)
		}
		return len(holds) == 1
	})
	holdRow := fmt.Sprintf(`tr[data-hold-id="%s"]`, holds[0].ID)

	other := newBrowser(t, o.url, "other")
	other.signInSSO(m, &mockoidc.MockUser{Subject: "other-2", PreferredUsername: "olga", Groups: []string{"dev"}})
	other.do("held page", chromedp.Navigate(o.url+"/ui/held"), chromedp.WaitVisible(chromedp.CSS(holdRow)))
	if n := js[int](other, `document.querySelectorAll("button.approve, button.reject").length`); n != 0 {
		t.Errorf("a person the hold does not name sees %d decision buttons", n)
	}
	csrf := js[string](other, `document.querySelector('input[name="csrf"]').value`)
	if st := other.postStatus("/ui/held/"+holds[0].ID+"/decision", map[string]string{"csrf": csrf, "decision": "approve"}); st != 409 {
		t.Errorf("another person's approval: %d, want 409", st)
	}
	if h := o.heldRuns(t, deployRun); len(h) != 1 || h[0].Status != "pending" {
		t.Fatalf("hold after the refused approval: %+v", h)
	}

	rev := newBrowser(t, o.url, "reviewer")
	rev.signInSSO(m, &mockoidc.MockUser{Subject: "rev-1", PreferredUsername: "rita", Groups: []string{"dev"}})
	rev.do("approve as the reviewer", chromedp.Navigate(o.url+"/ui/held"),
		chromedp.Click(chromedp.CSS(holdRow+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	if r := o.waitRunStatus(t, deployRun, 90*time.Second, "success", "failed", "cancelled"); r.Status != "success" {
		t.Fatalf("deploy run after the reviewer's approval = %s (%s)", r.Status, r.FailureReason)
	}
	if out := o.admin(t, "access-log", "list", "--action", "held_run.approve"); !strings.Contains(out, reviewer) {
		t.Errorf("access log of the approval lacks %s:\n%s", reviewer, out)
	}
}

// wantHeader fails the test unless the page header shows the signed-in
// person's name, identity (on hover), role and routing-key scope.
func (b *browser) wantHeader(name, identity, role, scope string) {
	b.t.Helper()
	if who, id := b.text("#who"), js[string](b, `document.getElementById("who").title`); who != name || id != identity {
		b.t.Fatalf("header: %q (%q), want %q (%q)", who, id, name, identity)
	}
	if r, sc := b.text(".who .role"), b.text(".who .scope"); r != role || sc != scope {
		b.t.Fatalf("role %q scope %q, want %q scoped to %q", r, sc, role, scope)
	}
}

// fakeGitHubOAuth is GitHub's OAuth app flow (authorize redirects straight
// back, as after the person clicked Authorize) and the user, orgs and
// teams API calls, for login octocat in team acme/release-managers. The
// token endpoint checks the PKCE verifier against the S256 challenge.
func fakeGitHubOAuth(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	challenges := map[string]string{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		challenges["code-1"] = q.Get("code_challenge")
		mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=code-1&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		ch := challenges[r.PostForm.Get("code")]
		mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		w.Header().Set("Content-Type", "application/json")
		if ch == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != ch {
			_, _ = w.Write([]byte(`{"error":"bad_verification_code"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"gho_e2e","token_type":"bearer"}`))
	})
	api := map[string]string{
		"/api/user":       `{"login":"octocat","name":"The Octocat","id":583231}`,
		"/api/user/orgs":  `[{"login":"acme"}]`,
		"/api/user/teams": `[{"slug":"release-managers","organization":{"login":"acme"}}]`,
	}
	for path, body := range api {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer gho_e2e" {
				http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(body))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestSignInGitHubInChromium signs in through GitHub's OAuth flow (a fake
// GitHub) in Chromium: the team rule makes octocat an admin scoped to a
// routing key, and the header names github:octocat.
func TestSignInGitHubInChromium(t *testing.T) {
	chromiumPath(t)
	gh := fakeGitHubOAuth(t)
	cfg := filepath.Join(t.TempDir(), "signin.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`providers:
  - {name: github, kind: github, label: GitHub, url: %q, apiUrl: %q, clientId: Iv1.e2e, clientSecret: shh}
roles:
  - {provider: github, groups: [acme/release-managers], role: admin, routingKey: "generic:acme:web"}
`, gh.URL, gh.URL+"/api")), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	o := startOrchestratorAt(t, t.TempDir(), port, "KICI_WEB_SIGNIN_CONFIG="+cfg, fmt.Sprintf("KICI_PUBLIC_URL=http://127.0.0.1:%d", port))
	b := newBrowser(t, o.url, "github")
	b.do("sign in with GitHub",
		chromedp.Navigate(o.url+"/ui/runs"),
		chromedp.WaitVisible(chromedp.ID("signin-github")),
		chromedp.Click(chromedp.ID("signin-github")),
		chromedp.WaitVisible(chromedp.ID("runs")))
	b.wantHeader("The Octocat", "github:octocat", "admin", "generic:acme:web")
	if out := o.admin(t, "access-log", "list", "--action", "web.sign_in"); !strings.Contains(out, "github:octocat") {
		t.Errorf("access log lacks the sign-in:\n%s", out)
	}
}
