package ghapi

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// RepoInfo is the part of GET /repos/{owner}/{repo} kici uses.
type RepoInfo struct {
	// FullName is "owner/repo" as GitHub spells it.
	FullName string `json:"full_name"`
	// DefaultBranch is the branch name (no refs/heads/), e.g. "main".
	DefaultBranch string `json:"default_branch"`
	// CloneURL is the HTTPS clone URL.
	CloneURL string `json:"clone_url"`
}

// Repository returns repo's metadata (GET /repos/{owner}/{repo}; GitHub
// REST "Get a repository"). A missing repository, or one the credentials
// cannot see, is ErrNotFound.
func (c *Client) Repository(ctx context.Context, installation int64, repo string) (*RepoInfo, error) {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return nil, err
	}
	var out RepoInfo
	if err := c.do(ctx, "GET", rp, auth, "", &out, 1<<20); err != nil {
		return nil, err
	}
	return &out, nil
}

// CommitSHA resolves ref to the 40-hex SHA of the commit it names (GET
// /repos/{owner}/{repo}/commits/{ref} with the
// application/vnd.github.sha media type, which answers the bare SHA and
// peels annotated tags). ref is what that endpoint documents: a commit
// SHA, "heads/<branch>", "tags/<tag>" or a bare name. An unknown ref is
// ErrNotFound (GitHub answers 404, or 422 "No commit found for SHA").
func (c *Client) CommitSHA(ctx context.Context, installation int64, repo, ref string) (string, error) {
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return "", err
	}
	if ref == "" || strings.Contains(ref, "..") {
		return "", fmt.Errorf("github: invalid ref %q", ref)
	}
	var segs []string
	for _, s := range strings.Split(ref, "/") {
		segs = append(segs, url.PathEscape(s))
	}
	p := rp + "/commits/" + strings.Join(segs, "/")
	body, err := c.raw(ctx, "GET", p, auth, "application/vnd.github.sha", nil, 128)
	if err != nil {
		if strings.Contains(err.Error(), "HTTP 422") {
			return "", fmt.Errorf("%w: GET %s", ErrNotFound, p)
		}
		return "", err
	}
	sha := strings.TrimSpace(string(body))
	if len(sha) != 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return "", fmt.Errorf("github: GET %s: not a commit SHA: %.60q", p, sha)
	}
	return sha, nil
}

// CommitMessage returns the full message of commit sha (GET
// /repos/{owner}/{repo}/git/commits/{sha}; GitHub REST "Get a commit
// object"), for the commitMessage and `[skip ci]` gates of events whose
// payload carries none (pull requests). An unknown commit is ErrNotFound.
func (c *Client) CommitMessage(ctx context.Context, installation int64, repo, sha string) (string, error) {
	if len(sha) != 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return "", fmt.Errorf("github: invalid commit SHA %q", sha)
	}
	rp, auth, err := c.repoCall(ctx, installation, repo)
	if err != nil {
		return "", err
	}
	var out struct {
		Message string `json:"message"`
	}
	if err := c.do(ctx, "GET", rp+"/git/commits/"+sha, auth, "", &out, 1<<20); err != nil {
		return "", err
	}
	return out.Message, nil
}
