package auth

import (
	"strings"
	"testing"
)

// The first matching rule decides; every condition a rule sets must hold;
// a person no rule matches gets nothing.
func TestRoleMapResolve(t *testing.T) {
	m, err := ParseRoleMap([]byte(`rules:
  - users: [gitea:alice]
    role: owner
  - provider: github
    groups: [acme/ci-admins]
    role: admin
    routingKey: "github:acme"
  - groups: [SRE]
    claims: {hd: example.com}
    role: auditor
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		id        Identity
		role      Role
		rk        string
		permitted bool
	}{
		{Identity{Kind: ProviderGitea, Subject: "alice"}, RoleOwner, "", true},
		{Identity{Kind: ProviderGitea, Subject: "bob", Groups: []string{"acme/ci-admins"}}, "", "", false}, // rule 2 is GitHub's only
		{Identity{Kind: ProviderGitHub, Subject: "bob", Groups: []string{"acme", "acme/ci-admins"}}, RoleAdmin, "github:acme", true},
		{Identity{Kind: ProviderOIDC, Issuer: "idp", Subject: "1", Groups: []string{"sre"}, Claims: map[string]string{"hd": "example.com"}}, RoleAuditor, "", true},
		{Identity{Kind: ProviderOIDC, Issuer: "idp", Subject: "2", Groups: []string{"sre"}, Claims: map[string]string{"hd": "evil.com"}}, "", "", false},
		{Identity{Kind: ProviderOIDC, Issuer: "idp", Subject: "3"}, "", "", false},
	}
	for _, c := range cases {
		role, rk, ok := m.Resolve(c.id)
		if role != c.role || rk != c.rk || ok != c.permitted {
			t.Errorf("%s: %q %q %v, want %q %q %v", c.id.ID(), role, rk, ok, c.role, c.rk, c.permitted)
		}
	}
	if got := (Identity{Kind: ProviderOIDC, Issuer: "idp.example.com", Subject: "42"}).ID(); got != "oidc:idp.example.com:42" {
		t.Errorf("OIDC identity %q", got)
	}
}

// A bad rule is refused with what to fix, not ignored.
func TestRoleMapRefusesBadRules(t *testing.T) {
	for doc, want := range map[string]string{
		"rules:\n  - users: [a]\n    role: root\n":                 "role \"root\"",
		"rules:\n  - role: admin\n":                                "set users, groups or claims",
		"rules:\n  - users: [a]\n    role: admin\n    provider: x": "provider \"x\"",
		"rules:\n  - users: [a]\n    role: admin\n    rol: x":      "unknown field",
	} {
		if _, err := ParseRoleMap([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", doc, err, want)
		}
	}
}
