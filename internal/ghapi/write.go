package ghapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// APIError is a GitHub answer outside 2xx on a write call: its status and
// headers (Retry-After, X-RateLimit-Remaining, X-RateLimit-Reset), so the
// caller can tell a rate limit or an outage from a refusal.
type APIError struct {
	Method, Path string
	StatusCode   int
	Header       http.Header
	Message      string
}

// Error reads like "github: POST /repos/o/r/check-runs: HTTP 422: Invalid request".
func (e *APIError) Error() string {
	return fmt.Sprintf("github: %s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, e.Message)
}

// send performs a JSON write call (body marshalled when non-nil) and
// decodes a 2xx answer into out (nil = discard). A non-2xx answer is an
// *APIError; transport failures are returned wrapped.
func (c *Client) send(ctx context.Context, method, path, auth string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "kici")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("github: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("github: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Message: e.Message}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("github: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// repoCall resolves repo and the installation's authorization for a call
// on a repository.
func (c *Client) repoCall(ctx context.Context, installation int64, repo string) (rp, auth string, err error) {
	if rp, err = repoPath(repo); err != nil {
		return "", "", err
	}
	auth, err = c.authFor(ctx, installation)
	return rp, auth, err
}

// CreateCheckRun creates a check run (POST /repos/{repo}/check-runs,
// GitHub "Checks" REST API; App installation tokens only) from body (name,
// head_sha, status, conclusion, external_id, details_url, output, …) and
// returns its id.
func (c *Client) CreateCheckRun(ctx context.Context, installation int64, repo string, body map[string]any) (int64, error) {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return 0, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	if err := c.send(ctx, "POST", rp+"/check-runs", auth, body, &out); err != nil {
		return 0, err
	}
	if out.ID == 0 {
		return 0, fmt.Errorf("github: POST %s/check-runs: answer without an id", rp)
	}
	return out.ID, nil
}

// UpdateCheckRun updates check run id (PATCH /repos/{repo}/check-runs/{id}).
func (c *Client) UpdateCheckRun(ctx context.Context, installation int64, repo string, id int64, body map[string]any) error {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return err
	}
	return c.send(ctx, "PATCH", rp+"/check-runs/"+strconv.FormatInt(id, 10), auth, body, nil)
}

// FindCheckRun returns the id of the check run named name on commit sha
// whose external_id is externalID (GET
// /repos/{repo}/commits/{sha}/check-runs?check_name=), 0 when there is none.
func (c *Client) FindCheckRun(ctx context.Context, installation int64, repo, sha, name, externalID string) (int64, error) {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return 0, err
	}
	var out struct {
		CheckRuns []struct {
			ID         int64  `json:"id"`
			ExternalID string `json:"external_id"`
		} `json:"check_runs"`
	}
	p := rp + "/commits/" + url.PathEscape(sha) + "/check-runs?filter=all&per_page=100&check_name=" + url.QueryEscape(name)
	if err := c.send(ctx, "GET", p, auth, nil, &out); err != nil {
		return 0, err
	}
	for _, cr := range out.CheckRuns {
		if cr.ExternalID == externalID {
			return cr.ID, nil
		}
	}
	return 0, nil
}

// CreateStatus posts a commit status (POST /repos/{repo}/statuses/{sha};
// body: state, context, description, target_url).
func (c *Client) CreateStatus(ctx context.Context, installation int64, repo, sha string, body map[string]any) error {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return err
	}
	return c.send(ctx, "POST", rp+"/statuses/"+url.PathEscape(sha), auth, body, nil)
}

// CreateIssueComment comments on issue or pull request number (POST
// /repos/{repo}/issues/{number}/comments).
func (c *Client) CreateIssueComment(ctx context.Context, installation int64, repo string, number int64, text string) error {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return err
	}
	return c.send(ctx, "POST", rp+"/issues/"+strconv.FormatInt(number, 10)+"/comments", auth, map[string]any{"body": text}, nil)
}

// RepoInstallation returns the App's installation id on repo (GET
// /repos/{repo}/installation, authenticated with the App JWT).
func (c *Client) RepoInstallation(ctx context.Context, repo string) (int64, error) {
	rp, err := repoPath(repo)
	if err != nil {
		return 0, err
	}
	jwtTok, err := c.AppJWT()
	if err != nil {
		return 0, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	if err := c.send(ctx, "GET", rp+"/installation", "Bearer "+jwtTok, nil, &out); err != nil {
		return 0, err
	}
	if out.ID <= 0 {
		return 0, fmt.Errorf("github: GET %s/installation: no installation id", rp)
	}
	return out.ID, nil
}
