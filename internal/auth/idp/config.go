// Package idp signs people in to the web UI through an identity provider:
// any OpenID Connect provider (discovery, PKCE, state and nonce, ID-token
// validation with github.com/coreos/go-oidc/v3) or a forge's OAuth2
// (GitHub, Gitea/Forgejo, GitLab: the login and, where the forge's API
// gives them, organisations and teams). It turns a successful sign-in
// into an auth.Identity; which role that person gets is auth.RoleMap's
// decision.
package idp

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"

	"kici.dev/kici/internal/auth"
)

// ProviderConfig configures one sign-in button.
type ProviderConfig struct {
	// Name is the provider's id in the sign-in URLs
	// (/ui/login/<name>, callback /ui/login/<name>/callback):
	// lowercase letters, digits and '-'.
	Name string `yaml:"name" json:"name"`
	// Kind is oidc, github, gitea (also Forgejo) or gitlab.
	Kind auth.ProviderKind `yaml:"kind" json:"kind"`
	// Label is the button's text (default "Sign in with <Name>").
	Label string `yaml:"label" json:"label"`
	// Issuer is the OIDC issuer URL (kind oidc), whose
	// /.well-known/openid-configuration is read.
	Issuer string `yaml:"issuer" json:"issuer"`
	// URL is the forge's web address (gitea and gitlab; github defaults
	// to https://github.com).
	URL string `yaml:"url" json:"url"`
	// APIURL is GitHub's API address (default https://api.github.com;
	// GitHub Enterprise: https://<host>/api/v3).
	APIURL string `yaml:"apiUrl" json:"apiUrl"`
	// ClientID and ClientSecret are the OAuth2 client's credentials;
	// ClientSecretFile reads the secret from a file instead (never
	// logged either way).
	ClientID         string `yaml:"clientId" json:"clientId"`
	ClientSecret     string `yaml:"clientSecret" json:"clientSecret"`
	ClientSecretFile string `yaml:"clientSecretFile" json:"clientSecretFile"`
	// Scopes replaces the default scopes (oidc: openid profile email;
	// github: read:user read:org; gitea: openid profile email
	// read:user read:organization; gitlab: read_user read_api).
	Scopes []string `yaml:"scopes" json:"scopes"`
	// GroupsClaim is the ID-token claim holding the person's groups
	// (oidc; default "groups").
	GroupsClaim string `yaml:"groupsClaim" json:"groupsClaim"`
}

// Config is the sign-in file (KICI_WEB_SIGNIN_CONFIG): the providers
// offered on the sign-in page and the rules mapping people to roles.
type Config struct {
	Providers []ProviderConfig `yaml:"providers" json:"providers"`
	// Roles maps identities to roles and routing-key scopes: the first
	// matching rule decides; nobody else may sign in.
	Roles []auth.RoleRule `yaml:"roles" json:"roles"`
}

// RoleMap returns the config's role rules as an auth.RoleMap.
func (c *Config) RoleMap() *auth.RoleMap { return &auth.RoleMap{Rules: c.Roles} }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// LoadConfig reads and validates a sign-in file (YAML or JSON), resolving
// clientSecretFile entries.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign-in config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates a sign-in document.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("sign-in config: %w (quote identities and other values containing \":\", e.g. \"gitea:alice\")", err)
	}
	seen := map[string]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("sign-in config: provider %d (%s): %w", i+1, p.Name, err)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("sign-in config: provider name %q is used twice", p.Name)
		}
		seen[p.Name] = true
	}
	if err := c.RoleMap().Validate(); err != nil {
		return nil, fmt.Errorf("sign-in config: %w", err)
	}
	if len(c.Providers) > 0 && len(c.Roles) == 0 {
		return nil, fmt.Errorf("sign-in config: providers are set but no roles: nobody could sign in; add roles rules (see docs/web-ui.md)")
	}
	return &c, nil
}

func (p *ProviderConfig) validate() error {
	if !nameRE.MatchString(p.Name) {
		return fmt.Errorf("name must be 1-32 lowercase letters, digits or '-', starting with a letter or digit")
	}
	if p.ClientID == "" {
		return fmt.Errorf("clientId is required")
	}
	if p.ClientSecretFile != "" {
		if p.ClientSecret != "" {
			return fmt.Errorf("set clientSecret or clientSecretFile, not both")
		}
		b, err := os.ReadFile(p.ClientSecretFile)
		if err != nil {
			return fmt.Errorf("clientSecretFile: %w", err)
		}
		p.ClientSecret = strings.TrimSpace(string(b))
	}
	switch p.Kind {
	case auth.ProviderOIDC:
		if err := checkURL("issuer", p.Issuer); err != nil {
			return err
		}
	case auth.ProviderGitHub:
		if p.URL == "" {
			p.URL = "https://github.com"
		}
		if p.APIURL == "" {
			p.APIURL = "https://api.github.com"
		}
		if err := checkURL("apiUrl", p.APIURL); err != nil {
			return err
		}
	case auth.ProviderGitea, auth.ProviderGitLab:
		if p.URL == "" && p.Kind == auth.ProviderGitLab {
			p.URL = "https://gitlab.com"
		}
	default:
		return fmt.Errorf("kind %q is not one of oidc, github, gitea, gitlab", p.Kind)
	}
	if p.Kind != auth.ProviderOIDC {
		if err := checkURL("url", p.URL); err != nil {
			return err
		}
	}
	// The issuer stays as written: go-oidc compares it byte for byte with
	// the discovery document's (Gitea's ends with a slash).
	p.URL, p.APIURL = strings.TrimRight(p.URL, "/"), strings.TrimRight(p.APIURL, "/")
	if p.Label == "" {
		p.Label = "Sign in with " + p.Name
	}
	return nil
}

func checkURL(field, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s %q must be an http(s) URL without credentials, query or fragment", field, v)
	}
	return nil
}
