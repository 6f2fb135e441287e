package lockfetch

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GitBudget bounds one git lock fetch (30 s, as in KiCI).
const GitBudget = 30 * time.Second

// GitAuth is an HTTP credential for a git fetch. It is passed to git as an
// http.extraHeader through the environment (GIT_CONFIG_*), never in the URL
// or on the command line.
type GitAuth struct {
	Username string
	Secret   string
}

// AllowedGitProtocols are the transports a git lock fetch may use
// (GIT_ALLOW_PROTOCOL): never ext:: or other helpers.
const AllowedGitProtocols = "file:git:http:https:ssh"

// FetchGitLock reads .kici/kici.lock.json at ref ("HEAD", a branch, a tag
// or a commit SHA) of the repository at repoURL with a shallow (depth 1),
// blob-less fetch: only the commit, its trees and the lock's blob are
// transferred, within GitBudget. It returns ErrMissing when the ref or the
// file does not exist and ErrTooLarge when the blob exceeds maxBytes
// (checked from the tree before the blob is read).
func FetchGitLock(ctx context.Context, repoURL, ref string, maxBytes int64, auth *GitAuth) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, GitBudget)
	defer cancel()
	c, err := OpenGitCommit(ctx, repoURL, ref, auth)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ReadFile(ctx, LockPath, maxBytes)
}

// GitCommit is one commit of a remote repository fetched shallow (depth
// 1) and blob-less into a temporary bare repository: its message and
// tree are local, and a file's blob is fetched when ReadFile asks for it.
// Every git command runs within GitBudget. Close removes the directory.
type GitCommit struct {
	dir string
	env []string
}

// OpenGitCommit fetches ref ("HEAD", a branch, a tag or a commit SHA) of
// the repository at repoURL. ErrMissing (wrapped) means the ref does not
// exist.
func OpenGitCommit(ctx context.Context, repoURL, ref string, auth *GitAuth) (*GitCommit, error) {
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n\\") || ref == "" {
		return nil, fmt.Errorf("git lock fetch: invalid ref %q", ref)
	}
	if strings.HasPrefix(repoURL, "-") {
		return nil, fmt.Errorf("git lock fetch: invalid repository URL %q", repoURL)
	}
	dir, err := os.MkdirTemp("", "kici-lockfetch-")
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_ALLOW_PROTOCOL="+AllowedGitProtocols, "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false")
	if auth != nil && auth.Secret != "" {
		user := auth.Username
		if user == "" {
			user = "kici"
		}
		hdr := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+auth.Secret))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0="+hdr)
	}
	c := &GitCommit{dir: dir, env: env}
	if _, err := c.git(ctx, "init", "-q", "--bare"); err != nil {
		c.Close()
		return nil, err
	}
	for _, kv := range [][2]string{{"remote.origin.url", repoURL}, {"remote.origin.promisor", "true"}, {"remote.origin.partialclonefilter", "blob:none"}} {
		if _, err := c.git(ctx, "config", kv[0], kv[1]); err != nil {
			c.Close()
			return nil, err
		}
	}
	if _, err := c.git(ctx, "fetch", "-q", "--depth=1", "--filter=blob:none", "--no-tags", "origin", ref); err != nil {
		c.Close()
		msg := err.Error()
		if strings.Contains(msg, "couldn't find remote ref") || strings.Contains(msg, "not our ref") ||
			strings.Contains(msg, "no such remote ref") || strings.Contains(msg, "unadvertised object") {
			return nil, fmt.Errorf("%w: ref %s: %v", ErrMissing, ref, err)
		}
		return nil, err
	}
	return c, nil
}

// git runs one git command in the commit's repository within GitBudget.
func (c *GitCommit) git(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, GitBudget)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", c.dir}, args...)...)
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s: exceeded the %s budget", args[0], GitBudget)
		}
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ReadFile returns the content of the regular file at path (slash
// separated, relative to the repository root) in the commit. It returns
// ErrMissing when the commit has no such file and ErrTooLarge when it
// exceeds maxBytes (checked from the tree before the blob is fetched).
func (c *GitCommit) ReadFile(ctx context.Context, path string, maxBytes int64) ([]byte, error) {
	if path == "" || strings.HasPrefix(path, "-") || strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("git: invalid path %q", path)
	}
	out, err := c.git(ctx, "ls-tree", "-l", "FETCH_HEAD", "--", path)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(out))
	if len(fields) < 4 || fields[1] != "blob" || !strings.HasPrefix(fields[0], "100") {
		return nil, ErrMissing
	}
	size, err := strconv.ParseInt(fields[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("git ls-tree: bad size %q", fields[3])
	}
	if size > maxBytes {
		return nil, ErrTooLarge
	}
	blob, err := c.git(ctx, "cat-file", "blob", fields[2])
	if err != nil {
		return nil, err
	}
	if int64(len(blob)) > maxBytes {
		return nil, ErrTooLarge
	}
	return blob, nil
}

// Message returns the commit's full message (subject and body, trailing
// newlines trimmed).
func (c *GitCommit) Message(ctx context.Context) (string, error) {
	out, err := c.git(ctx, "log", "-1", "--format=%B", "FETCH_HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// Close removes the temporary repository.
func (c *GitCommit) Close() error { return os.RemoveAll(c.dir) }

// ErrBadRepo is returned by RepoURL for repository names that cannot be
// put into a clone URL safely.
var ErrBadRepo = errors.New("invalid repository name")

// RepoURL fills a git URL template's {repo} ("owner/name"), {owner} and
// {name} placeholders. The name comes from a webhook payload, so it must be
// plain path segments of [A-Za-z0-9._-] (no "..", no leading "-" or ".").
func RepoURL(template, repo string) (string, error) {
	parts := strings.Split(repo, "/")
	if len(parts) < 2 {
		return "", fmt.Errorf("%w %q (want owner/name)", ErrBadRepo, repo)
	}
	for _, p := range parts {
		if p == "" || p[0] == '.' || p[0] == '-' || len(p) > 100 {
			return "", fmt.Errorf("%w %q", ErrBadRepo, repo)
		}
		for _, c := range p {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return "", fmt.Errorf("%w %q", ErrBadRepo, repo)
			}
		}
	}
	owner, name := strings.Join(parts[:len(parts)-1], "/"), parts[len(parts)-1]
	return strings.NewReplacer("{repo}", repo, "{owner}", owner, "{name}", name).Replace(template), nil
}
