// Package ghapi is kici's small GitHub REST client: it authenticates as a
// GitHub App (an RS256 JWT minted from the App's private key, exchanged for
// per-installation access tokens that are cached until shortly before they
// expire) or with a fixed token, and calls the few endpoints the pipeline
// needs: repository contents (the lock file), compare (changed files of a
// push), pull request files, and a user's permission on a repository. The
// API base URL is configurable (GitHub Enterprise, and tests point it at an
// httptest fake).
package ghapi

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultBaseURL is the public GitHub REST API root.
const DefaultBaseURL = "https://api.github.com"

// Errors returned by Client methods (errors.Is targets).
var (
	// ErrNotFound: the file, repository, ref or user does not exist (404).
	ErrNotFound = errors.New("github: not found")
	// ErrTooLarge: the file is larger than the caller's cap.
	ErrTooLarge = errors.New("github: file too large")
)

// MaxFilePages bounds the pages read from paginated file lists (100 files
// per page; GitHub itself stops at 3000 files for a pull request).
const MaxFilePages = 30

// Client calls the GitHub REST API. Create it with NewAppClient or
// NewTokenClient; it is safe for concurrent use.
type Client struct {
	base string
	http *http.Client

	// token source: fixed token, or App installation tokens.
	token string
	appID int64
	key   *rsa.PrivateKey
	now   func() time.Time

	mu     sync.Mutex
	tokens map[int64]installToken
}

type installToken struct {
	token   string
	expires time.Time
}

func newClient(base string, hc *http.Client) *Client {
	if base == "" {
		base = DefaultBaseURL
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), http: hc, now: time.Now, tokens: map[int64]installToken{}}
}

// NewTokenClient authenticates every call with token ("Bearer <token>").
// hc nil = a client with a 30 s timeout.
func NewTokenClient(baseURL, token string, hc *http.Client) *Client {
	c := newClient(baseURL, hc)
	c.token = token
	return c
}

// NewAppClient authenticates as GitHub App appID with its PEM (PKCS#1 or
// PKCS#8) RSA private key. Errors: an unparsable key.
func NewAppClient(baseURL string, appID int64, privateKeyPEM string, hc *http.Client) (*Client, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(privateKeyPEM))
	if err != nil {
		return nil, fmt.Errorf("github app private key: %w", err)
	}
	if appID <= 0 {
		return nil, errors.New("github app id must be a positive integer")
	}
	c := newClient(baseURL, hc)
	c.appID, c.key = appID, key
	return c, nil
}

// IsApp reports whether the client authenticates as a GitHub App.
func (c *Client) IsApp() bool { return c.key != nil }

// AppJWT returns a fresh App JWT: RS256, iss = App id, iat 60 s in the past
// (clock skew), exp 9 minutes ahead (GitHub's maximum is 10).
func (c *Client) AppJWT() (string, error) {
	if c.key == nil {
		return "", errors.New("github: not an App client")
	}
	now := c.now()
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(c.appID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-60 * time.Second)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.key)
}

// AppInfo is the part of GET /app kici reads.
type AppInfo struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// App validates the App credentials with GET /app and returns its identity.
func (c *Client) App(ctx context.Context) (*AppInfo, error) {
	jwtTok, err := c.AppJWT()
	if err != nil {
		return nil, err
	}
	var info AppInfo
	if err := c.do(ctx, "GET", "/app", "Bearer "+jwtTok, "", &info, 1<<20); err != nil {
		return nil, err
	}
	return &info, nil
}

// authFor returns the Authorization header for calls on behalf of
// installation (ignored by token clients; required by App clients).
func (c *Client) authFor(ctx context.Context, installation int64) (string, error) {
	if c.key == nil {
		if c.token == "" {
			return "", nil
		}
		return "Bearer " + c.token, nil
	}
	if installation <= 0 {
		return "", errors.New("github: the event carries no installation id (App sources need one)")
	}
	c.mu.Lock()
	t, ok := c.tokens[installation]
	c.mu.Unlock()
	if ok && c.now().Before(t.expires.Add(-time.Minute)) {
		return "Bearer " + t.token, nil
	}
	jwtTok, err := c.AppJWT()
	if err != nil {
		return "", err
	}
	var resp struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	path := "/app/installations/" + strconv.FormatInt(installation, 10) + "/access_tokens"
	if err := c.do(ctx, "POST", path, "Bearer "+jwtTok, "", &resp, 1<<20); err != nil {
		return "", fmt.Errorf("installation token: %w", err)
	}
	if resp.Token == "" {
		return "", errors.New("github: installation token response without a token")
	}
	if resp.ExpiresAt.IsZero() {
		resp.ExpiresAt = c.now().Add(time.Hour)
	}
	c.mu.Lock()
	c.tokens[installation] = installToken{token: resp.Token, expires: resp.ExpiresAt}
	c.mu.Unlock()
	return "Bearer " + resp.Token, nil
}

// do performs one request; out (JSON) may be nil. Responses larger than
// limit bytes are an error. 404 ⇒ ErrNotFound.
func (c *Client) do(ctx context.Context, method, path, auth, accept string, out any, limit int64) error {
	_, err := c.raw(ctx, method, path, auth, accept, out, limit)
	return err
}

func (c *Client) raw(ctx context.Context, method, path, auth, accept string, out any, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if accept == "" {
		accept = "application/vnd.github+json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "kici")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("github: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("github: %s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %s %s", ErrNotFound, method, path)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return nil, fmt.Errorf("github: %s %s: HTTP %d: %s", method, path, resp.StatusCode, e.Message)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: %s %s exceeds %d bytes", ErrTooLarge, method, path, limit)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return nil, fmt.Errorf("github: %s %s: decode: %w", method, path, err)
		}
	}
	return body, nil
}

// repoPath validates "owner/repo" and returns "/repos/owner/repo".
func repoPath(repo string) (string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || owner == ".." || name == ".." || owner == "." || name == "." {
		return "", fmt.Errorf("github: invalid repository %q (want owner/repo)", repo)
	}
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name), nil
}

// GetFile returns the raw content of path at ref (a SHA, branch or tag)
// via GET /repos/{repo}/contents/{path}?ref=, capped at maxBytes
// (ErrTooLarge above it). ErrNotFound when the file or ref is missing.
func (c *Client) GetFile(ctx context.Context, installation int64, repo, path, ref string, maxBytes int64) ([]byte, error) {
	rp, err := repoPath(repo)
	if err != nil {
		return nil, err
	}
	auth, err := c.authFor(ctx, installation)
	if err != nil {
		return nil, err
	}
	var segs []string
	for _, s := range strings.Split(path, "/") {
		segs = append(segs, url.PathEscape(s))
	}
	p := rp + "/contents/" + strings.Join(segs, "/")
	if ref != "" {
		p += "?ref=" + url.QueryEscape(ref)
	}
	return c.raw(ctx, "GET", p, auth, "application/vnd.github.raw+json", nil, maxBytes)
}

// CompareFiles returns the files changed between base and head via GET
// /repos/{repo}/compare/{base}...{head} (paginated, 100 per page, at most
// MaxFilePages pages).
func (c *Client) CompareFiles(ctx context.Context, installation int64, repo, base, head string) ([]string, error) {
	rp, err := repoPath(repo)
	if err != nil {
		return nil, err
	}
	return c.fileList(ctx, installation, rp+"/compare/"+url.PathEscape(base)+"..."+url.PathEscape(head), true)
}

// PullFiles returns the files of pull request number via GET
// /repos/{repo}/pulls/{number}/files (paginated, at most MaxFilePages).
func (c *Client) PullFiles(ctx context.Context, installation int64, repo string, number int64) ([]string, error) {
	rp, err := repoPath(repo)
	if err != nil {
		return nil, err
	}
	return c.fileList(ctx, installation, rp+"/pulls/"+strconv.FormatInt(number, 10)+"/files", false)
}

func (c *Client) fileList(ctx context.Context, installation int64, path string, compare bool) ([]string, error) {
	auth, err := c.authFor(ctx, installation)
	if err != nil {
		return nil, err
	}
	var out []string
	for page := 1; page <= MaxFilePages; page++ {
		p := path + "?per_page=100&page=" + strconv.Itoa(page)
		type file struct {
			Filename string `json:"filename"`
		}
		var files []file
		if compare {
			var cmp struct {
				Files []file `json:"files"`
			}
			if err := c.do(ctx, "GET", p, auth, "", &cmp, 32<<20); err != nil {
				return nil, err
			}
			files = cmp.Files
		} else if err := c.do(ctx, "GET", p, auth, "", &files, 32<<20); err != nil {
			return nil, err
		}
		for _, f := range files {
			out = append(out, f.Filename)
		}
		if len(files) < 100 {
			break
		}
	}
	return out, nil
}

// Permission returns user's permission on repo ("admin", "maintain",
// "write", "triage", "read" or "none") via GET
// /repos/{repo}/collaborators/{user}/permission. A user GitHub does not
// know as a collaborator (404) has "none".
func (c *Client) Permission(ctx context.Context, installation int64, repo, user string) (string, error) {
	rp, err := repoPath(repo)
	if err != nil {
		return "", err
	}
	if user == "" {
		return "none", nil
	}
	auth, err := c.authFor(ctx, installation)
	if err != nil {
		return "", err
	}
	var resp struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	err = c.do(ctx, "GET", rp+"/collaborators/"+url.PathEscape(user)+"/permission", auth, "", &resp, 1<<20)
	if errors.Is(err, ErrNotFound) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	if resp.RoleName == "maintain" {
		return "maintain", nil
	}
	return resp.Permission, nil
}

// CanWrite reports whether a permission grants push access.
func CanWrite(permission string) bool {
	switch permission {
	case "admin", "maintain", "write":
		return true
	}
	return false
}
