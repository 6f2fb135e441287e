package idp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"kici.dev/kici/internal/auth"
)

// Pending is what the browser carries between leaving for the provider and
// coming back (the web package keeps it in a short-lived cookie): the
// state echoed by the provider, the OIDC nonce expected in the ID token,
// the PKCE code verifier (RFC 7636) and the page to open afterwards.
type Pending struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

// NewPending returns a Pending for provider with fresh random state, nonce
// and PKCE verifier.
func NewPending(provider, next string) Pending {
	return Pending{Provider: provider, State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(),
		Verifier: oauth2.GenerateVerifier(), Next: next}
}

// ErrDenied wraps a sign-in the provider or the person refused (the
// provider's error parameter, a bad state, an invalid ID token).
var ErrDenied = errors.New("sign-in refused")

// Provider is one configured identity provider. Safe for concurrent use.
type Provider struct {
	cfg      ProviderConfig
	redirect string
	client   *http.Client

	// OIDC discovery happens on first use (and is retried after a
	// failure), so a provider that is down at start-up does not stop the
	// orchestrator.
	mu       sync.Mutex
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// New returns the provider of cfg whose callback is redirectURL (the
// public URL of /ui/login/<name>/callback). client (nil = a default
// client) makes every request to the provider.
func New(cfg ProviderConfig, redirectURL string, client *http.Client) *Provider {
	if client == nil {
		client = &http.Client{Timeout: httpTimeout}
	}
	return &Provider{cfg: cfg, redirect: redirectURL, client: client}
}

// Name is the provider's id in URLs; Label its button text; Kind its kind.
func (p *Provider) Name() string { return p.cfg.Name }

// Label is the sign-in button's text.
func (p *Provider) Label() string { return p.cfg.Label }

// Kind is the provider's kind.
func (p *Provider) Kind() auth.ProviderKind { return p.cfg.Kind }

func (p *Provider) ctx(ctx context.Context) context.Context {
	return context.WithValue(oidc.ClientContext(ctx, p.client), oauth2.HTTPClient, p.client)
}

// discover reads the OIDC discovery document once.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oidc == nil {
		// The key set keeps this context for its later fetches: it must
		// outlive the request.
		op, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), p.client), p.cfg.Issuer)
		if err != nil {
			return nil, nil, fmt.Errorf("OpenID Connect discovery of %s: %w", p.cfg.Issuer, err)
		}
		p.oidc, p.verifier = op, op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID})
	}
	return p.oidc, p.verifier, nil
}

func (p *Provider) oauth(ctx context.Context) (*oauth2.Config, error) {
	c := &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: p.redirect, Scopes: p.cfg.Scopes}
	switch p.cfg.Kind {
	case auth.ProviderOIDC:
		op, _, err := p.discover(ctx)
		if err != nil {
			return nil, err
		}
		c.Endpoint = op.Endpoint()
		if c.Scopes == nil {
			c.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
		}
	case auth.ProviderGitHub:
		c.Endpoint = oauth2.Endpoint{AuthURL: p.cfg.URL + "/login/oauth/authorize", TokenURL: p.cfg.URL + "/login/oauth/access_token"}
		if c.Scopes == nil {
			c.Scopes = []string{"read:user", "read:org"}
		}
	case auth.ProviderGitea:
		c.Endpoint = oauth2.Endpoint{AuthURL: p.cfg.URL + "/login/oauth/authorize", TokenURL: p.cfg.URL + "/login/oauth/access_token"}
		if c.Scopes == nil {
			c.Scopes = []string{"read:user", "read:organization"}
		}
	case auth.ProviderGitLab:
		c.Endpoint = oauth2.Endpoint{AuthURL: p.cfg.URL + "/oauth/authorize", TokenURL: p.cfg.URL + "/oauth/token"}
		if c.Scopes == nil {
			c.Scopes = []string{"read_user", "read_api"}
		}
	}
	return c, nil
}

// AuthURL returns the provider's authorization URL for pend: the state,
// the PKCE S256 challenge and (OIDC) the nonce.
func (p *Provider) AuthURL(ctx context.Context, pend Pending) (string, error) {
	c, err := p.oauth(p.ctx(ctx))
	if err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pend.Verifier)}
	if p.cfg.Kind == auth.ProviderOIDC {
		opts = append(opts, oidc.Nonce(pend.Nonce))
	}
	return c.AuthCodeURL(pend.State, opts...), nil
}

// Finish exchanges the authorization code of the callback for the
// person's identity: the caller has checked the state; Finish sends the
// PKCE verifier and, for OIDC, validates the ID token (signature, issuer,
// audience, expiry) and its nonce.
func (p *Provider) Finish(ctx context.Context, code string, pend Pending) (auth.Identity, error) {
	ctx = p.ctx(ctx)
	c, err := p.oauth(ctx)
	if err != nil {
		return auth.Identity{}, err
	}
	tok, err := c.Exchange(ctx, code, oauth2.VerifierOption(pend.Verifier))
	if err != nil {
		return auth.Identity{}, fmt.Errorf("%w: the code exchange with %s failed: %v", ErrDenied, p.cfg.Name, err)
	}
	if p.cfg.Kind == auth.ProviderOIDC {
		return p.oidcIdentity(ctx, tok, pend)
	}
	return p.forgeIdentity(ctx, tok.AccessToken)
}

func (p *Provider) oidcIdentity(ctx context.Context, tok *oauth2.Token, pend Pending) (auth.Identity, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return auth.Identity{}, fmt.Errorf("%w: %s returned no ID token (is the openid scope granted?)", ErrDenied, p.cfg.Name)
	}
	_, v, err := p.discover(ctx)
	if err != nil {
		return auth.Identity{}, err
	}
	idt, err := v.Verify(ctx, raw)
	if err != nil {
		return auth.Identity{}, fmt.Errorf("%w: invalid ID token: %v", ErrDenied, err)
	}
	if idt.Nonce != pend.Nonce {
		return auth.Identity{}, fmt.Errorf("%w: the ID token's nonce does not match this sign-in", ErrDenied)
	}
	var all map[string]any
	if err := idt.Claims(&all); err != nil {
		return auth.Identity{}, fmt.Errorf("%w: ID token claims: %v", ErrDenied, err)
	}
	u, _ := url.Parse(idt.Issuer)
	id := auth.Identity{Kind: auth.ProviderOIDC, Issuer: u.Host, Subject: idt.Subject, Claims: map[string]string{}}
	for k, val := range all {
		if s, ok := val.(string); ok {
			id.Claims[k] = s
		}
	}
	id.Name, id.Login, id.Email = id.Claims["name"], id.Claims["preferred_username"], id.Claims["email"]
	gc := p.cfg.GroupsClaim
	if gc == "" {
		gc = "groups"
	}
	switch g := all[gc].(type) {
	case string:
		id.Groups = []string{g}
	case []any:
		for _, e := range g {
			if s, ok := e.(string); ok {
				id.Groups = append(id.Groups, s)
			}
		}
	}
	return id, nil
}
