package auth

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
)

// ProviderKind is the kind of identity provider a person signs in with.
type ProviderKind string

// Identity provider kinds.
const (
	// ProviderOIDC is any OpenID Connect provider (discovery, PKCE,
	// ID-token validation).
	ProviderOIDC ProviderKind = "oidc"
	// ProviderGitHub is GitHub's OAuth app flow.
	ProviderGitHub ProviderKind = "github"
	// ProviderGitea is Gitea's or Forgejo's OAuth2 provider.
	ProviderGitea ProviderKind = "gitea"
	// ProviderGitLab is GitLab's OAuth2 provider.
	ProviderGitLab ProviderKind = "gitlab"
)

// Identity is a person as an identity provider vouched for them at
// sign-in.
type Identity struct {
	// Kind is the provider's kind.
	Kind ProviderKind
	// Issuer is the OIDC issuer's host (ProviderOIDC only).
	Issuer string
	// Subject is the provider's stable id of the person: the ID token's
	// sub claim for OIDC, the login for a forge.
	Subject string
	// Login is the forge login or the OIDC preferred_username.
	Login string
	// Name and Email are shown in the UI when present.
	Name, Email string
	// Groups are the OIDC groups claim's values, or for a forge the
	// person's organisations ("org") and teams ("org/team").
	Groups []string
	// Claims are the ID token's other string claims (OIDC only).
	Claims map[string]string
}

// ID is the identity recorded in approvals and the access log:
// "oidc:<issuer-host>:<sub>" or "<forge>:<login>" (github, gitea,
// gitlab). A context's requiredReviewers names people this way.
func (i Identity) ID() string {
	if i.Kind == ProviderOIDC {
		return "oidc:" + i.Issuer + ":" + i.Subject
	}
	return string(i.Kind) + ":" + i.Subject
}

// Display is how the UI shows the person: name, else login, else ID.
func (i Identity) Display() string {
	switch {
	case i.Name != "":
		return i.Name
	case i.Login != "":
		return i.Login
	}
	return i.ID()
}

// RoleRule maps the people it matches to a role and a routing-key scope.
// A rule matches when every condition it sets holds; a rule must set at
// least one of Users, Groups and Claims.
type RoleRule struct {
	// Provider limits the rule to one provider kind ("" = any).
	Provider ProviderKind `yaml:"provider" json:"provider"`
	// Users lists identities (Identity.ID, e.g. "gitea:alice",
	// "oidc:idp.example.com:248289761001"); any one matches.
	Users []string `yaml:"users" json:"users"`
	// Groups lists OIDC groups or forge organisations / "org/team";
	// the person must be in any one.
	Groups []string `yaml:"groups" json:"groups"`
	// Claims are ID-token claims that must all have these values.
	Claims map[string]string `yaml:"claims" json:"claims"`
	// Role is owner, admin or auditor.
	Role Role `yaml:"role" json:"role"`
	// RoutingKey is the scope of the people matched ("" = unscoped).
	RoutingKey string `yaml:"routingKey" json:"routingKey"`
}

// RoleMap maps identities to roles: the first rule that matches decides
// (so put narrow rules first). A person no rule matches may not sign in.
type RoleMap struct {
	Rules []RoleRule `yaml:"rules" json:"rules"`
}

// LoadRoleMap reads a role map file (YAML or JSON, see docs/web-ui.md) and
// validates it.
func LoadRoleMap(path string) (*RoleMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("role map: %w", err)
	}
	return ParseRoleMap(b)
}

// ParseRoleMap parses and validates a role map document.
func ParseRoleMap(b []byte) (*RoleMap, error) {
	var m RoleMap
	if err := yaml.UnmarshalWithOptions(b, &m, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("role map: %w (quote identities containing \":\", e.g. \"gitea:alice\")", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks every rule: a known role and provider, at least one
// condition, no blank entries.
func (m *RoleMap) Validate() error {
	for i, r := range m.Rules {
		n := i + 1
		if !IsRole(r.Role) {
			return fmt.Errorf("role map: rule %d: role %q is not one of owner, admin, auditor", n, r.Role)
		}
		switch r.Provider {
		case "", ProviderOIDC, ProviderGitHub, ProviderGitea, ProviderGitLab:
		default:
			return fmt.Errorf("role map: rule %d: provider %q is not one of oidc, github, gitea, gitlab", n, r.Provider)
		}
		if len(r.Users) == 0 && len(r.Groups) == 0 && len(r.Claims) == 0 {
			return fmt.Errorf("role map: rule %d: set users, groups or claims (a rule matching everyone is refused; list the groups instead)", n)
		}
		if slices.Contains(r.Users, "") || slices.Contains(r.Groups, "") {
			return fmt.Errorf("role map: rule %d: an empty user or group entry", n)
		}
	}
	return nil
}

// Resolve returns the role and routing-key scope of id from the first
// rule that matches; ok is false when none does (the person is refused).
func (m *RoleMap) Resolve(id Identity) (role Role, routingKey string, ok bool) {
	if m == nil {
		return "", "", false
	}
	for _, r := range m.Rules {
		if r.matches(id) {
			return r.Role, r.RoutingKey, true
		}
	}
	return "", "", false
}

func (r RoleRule) matches(id Identity) bool {
	if r.Provider != "" && r.Provider != id.Kind {
		return false
	}
	if len(r.Users) > 0 && !slices.Contains(r.Users, id.ID()) {
		return false
	}
	if len(r.Groups) > 0 && !slices.ContainsFunc(r.Groups, func(g string) bool {
		return slices.ContainsFunc(id.Groups, func(h string) bool { return strings.EqualFold(g, h) })
	}) {
		return false
	}
	for k, v := range r.Claims {
		if got, ok := id.Claims[k]; !ok || got != v {
			return false
		}
	}
	return true
}
