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

// GitBudget bounds one git lock fetch (KiCI: 30 s per fetch).
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
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n\\") || ref == "" {
		return nil, fmt.Errorf("git lock fetch: invalid ref %q", ref)
	}
	if strings.HasPrefix(repoURL, "-") {
		return nil, fmt.Errorf("git lock fetch: invalid repository URL %q", repoURL)
	}
	ctx, cancel := context.WithTimeout(ctx, GitBudget)
	defer cancel()
	dir, err := os.MkdirTemp("", "kici-lockfetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
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
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
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
	if _, err := git("init", "-q", "--bare"); err != nil {
		return nil, err
	}
	for _, kv := range [][2]string{{"remote.origin.url", repoURL}, {"remote.origin.promisor", "true"}, {"remote.origin.partialclonefilter", "blob:none"}} {
		if _, err := git("config", kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if _, err := git("fetch", "-q", "--depth=1", "--filter=blob:none", "--no-tags", "origin", ref); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "couldn't find remote ref") || strings.Contains(msg, "not our ref") ||
			strings.Contains(msg, "no such remote ref") || strings.Contains(msg, "unadvertised object") {
			return nil, fmt.Errorf("%w: ref %s: %v", ErrMissing, ref, err)
		}
		return nil, err
	}
	out, err := git("ls-tree", "-l", "FETCH_HEAD", "--", LockPath)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(out))
	if len(fields) < 4 || fields[1] != "blob" {
		return nil, ErrMissing
	}
	size, err := strconv.ParseInt(fields[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("git ls-tree: bad size %q", fields[3])
	}
	if size > maxBytes {
		return nil, ErrTooLarge
	}
	blob, err := git("cat-file", "blob", fields[2])
	if err != nil {
		return nil, err
	}
	if int64(len(blob)) > maxBytes {
		return nil, ErrTooLarge
	}
	return blob, nil
}

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
