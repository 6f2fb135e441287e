package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// createUser makes a site user login (not an administrator) with password
// and returns nothing; Gitea's own CLI, as an operator would.
func (g *giteaServer) createUser(t *testing.T, login, password string) {
	t.Helper()
	g.run(t, "admin", "user", "create", "--username", login, "--password", password,
		"--email", login+"@gitea.test", "--must-change-password=false")
}

// addTeamMember puts login in team of org (creating the team, with read
// access to code, when it does not exist).
func (g *giteaServer) addTeamMember(t *testing.T, org, team, login string) {
	t.Helper()
	if g.api(t, "GET", "/orgs/"+org, nil, nil, 404) == 404 {
		g.api(t, "POST", "/orgs", map[string]any{"username": org, "visibility": "public"}, nil)
	}
	var created struct {
		ID int64 `json:"id"`
	}
	g.api(t, "POST", "/orgs/"+org+"/teams", map[string]any{"name": team, "permission": "read", "units": []string{"repo.code"}}, &created)
	g.api(t, "PUT", fmt.Sprintf("/teams/%d/members/%s", created.ID, login), nil, nil)
}

// createOAuthApp registers a confidential OAuth2 application that sends
// people back to redirectURI, and returns its client id and secret.
func (g *giteaServer) createOAuthApp(t *testing.T, name, redirectURI string) (id, secret string) {
	t.Helper()
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	g.api(t, "POST", "/user/applications/oauth2", map[string]any{"name": name, "redirect_uris": []string{redirectURI}, "confidential_client": true}, &app)
	if app.ClientID == "" || app.ClientSecret == "" {
		t.Fatalf("Gitea made OAuth2 application %q without a client id or secret", name)
	}
	return app.ClientID, app.ClientSecret
}

// TestSignInGiteaInChromium signs a person in through a real Gitea in
// headless Chromium: kici sends the browser to Gitea, the person types
// their password on Gitea's login page and grants access on its consent
// page, and kici reads their team from Gitea's API: team acme/release
// maps to admin scoped to a routing key, and the header names gitea:alice.
func TestSignInGiteaInChromium(t *testing.T) {
	chromiumPath(t)
	g := startGitea(t)
	g.createUser(t, "alice", "alice-e2e-Passw0rd")
	g.addTeamMember(t, "acme", "release", "alice")

	port := freePort(t)
	public := fmt.Sprintf("http://127.0.0.1:%d", port)
	clientID, clientSecret := g.createOAuthApp(t, "kici", public+"/ui/login/gitea/callback")
	cfg := filepath.Join(t.TempDir(), "signin.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`providers:
  - {name: gitea, kind: gitea, label: Gitea, url: %q, clientId: %q, clientSecret: %q}
roles:
  - {provider: gitea, groups: [acme/release], role: admin, routingKey: "gitea:acme"}
`, g.URL, clientID, clientSecret)), 0o600); err != nil {
		t.Fatal(err)
	}
	o := startOrchestratorAt(t, t.TempDir(), port, "KICI_WEB_SIGNIN_CONFIG="+cfg, "KICI_PUBLIC_URL="+public, loopbackSourcesEnv)

	b := newBrowser(t, o.url, "gitea")
	b.do("go to Gitea's login page through kici",
		chromedp.Navigate(o.url+"/ui/runs"),
		chromedp.WaitVisible(chromedp.ID("signin-gitea")),
		chromedp.Click(chromedp.ID("signin-gitea")),
		chromedp.WaitVisible(chromedp.ID("user_name")))
	b.do("type the password on Gitea's page",
		chromedp.SendKeys(chromedp.ID("user_name"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), "alice-e2e-Passw0rd"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("authorize-app")))
	b.do("grant kici access on Gitea's consent page",
		chromedp.Click(chromedp.ID("authorize-app")),
		chromedp.WaitVisible(chromedp.ID("runs")))

	b.wantHeader("alice", "gitea:alice", "admin", "gitea:acme")
	if out := o.admin(t, "session", "list", "--user", "gitea:alice"); !strings.Contains(out, "gitea:alice") {
		t.Errorf("session list lacks gitea:alice:\n%s", out)
	}
}
