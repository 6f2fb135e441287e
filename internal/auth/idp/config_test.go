package idp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kici.dev/kici/internal/auth"
)

// A sign-in file with every provider kind loads with its defaults; the
// secret comes from clientSecretFile.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "signin.yaml")
	doc := `providers:
  - {name: sso, kind: oidc, issuer: "https://idp.example.com/", clientId: kici, clientSecretFile: ` + secret + `}
  - {name: github, kind: github, clientId: gh, clientSecret: x}
  - {name: gitea, kind: gitea, url: "https://git.example.com/", clientId: g, clientSecret: y}
  - {name: gitlab, kind: gitlab, clientId: l, clientSecret: z}
roles:
  - {users: ["gitea:alice"], role: owner}
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers
	if p[0].ClientSecret != "s3cret" || p[0].Issuer != "https://idp.example.com/" || p[0].Label != "Sign in with sso" {
		t.Errorf("oidc: %+v", p[0])
	}
	if p[1].URL != "https://github.com" || p[1].APIURL != "https://api.github.com" {
		t.Errorf("github defaults: %+v", p[1])
	}
	if p[2].URL != "https://git.example.com" || p[3].URL != "https://gitlab.com" {
		t.Errorf("forge URLs: %q %q", p[2].URL, p[3].URL)
	}
	if role, _, ok := c.RoleMap().Resolve(identity("gitea", "alice")); !ok || role != auth.RoleOwner {
		t.Errorf("role map: %q %v", role, ok)
	}
}

// Bad files are refused with what to fix.
func TestParseConfigRefuses(t *testing.T) {
	for doc, want := range map[string]string{
		"providers:\n  - {name: sso, kind: oidc, issuer: x, clientId: a}\nroles: [{users: [a], role: admin}]":                                "issuer",
		"providers:\n  - {name: Bad_Name, kind: github, clientId: a}\nroles: [{users: [a], role: admin}]":                                    "name must be",
		"providers:\n  - {name: a, kind: bitbucket, clientId: a}\nroles: [{users: [a], role: admin}]":                                        "kind \"bitbucket\"",
		"providers:\n  - {name: a, kind: github}\nroles: [{users: [a], role: admin}]":                                                        "clientId",
		"providers:\n  - {name: a, kind: github, clientId: x}\n  - {name: a, kind: github, clientId: y}\nroles: [{users: [a], role: admin}]": "used twice",
		"providers:\n  - {name: a, kind: github, clientId: x}\n":                                                                             "no roles",
	} {
		if _, err := ParseConfig([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", doc, err, want)
		}
	}
}

func identity(kind, login string) auth.Identity {
	return auth.Identity{Kind: auth.ProviderKind(kind), Subject: login}
}
