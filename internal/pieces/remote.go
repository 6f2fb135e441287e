package pieces

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Run-time library drift. The orchestrator never fetches a library's
// content, but when it creates a run it asks the library's remote which
// commit the pinned ref names now (`git ls-remote`, refs only): a tag or
// branch that moved since `kici compile` shows as drift on the run.

// Defaults of a RefResolver.
const (
	// DefaultRefTimeout bounds one `git ls-remote`.
	DefaultRefTimeout = 5 * time.Second
	// DefaultRefTTL is how long an answer (or a failure) is reused.
	DefaultRefTTL = 5 * time.Minute
	// DefaultRefProtocols are the git transports the orchestrator uses to
	// reach a library (GIT_ALLOW_PROTOCOL): https only, so a lock cannot
	// make the server use its own ssh keys or read its file system.
	DefaultRefProtocols = "https"
)

// RefResolver resolves library refs to commits with `git ls-remote`,
// caching each (url, ref) answer for TTL. It is safe for concurrent use;
// the zero value uses the defaults above.
type RefResolver struct {
	// Timeout bounds one ls-remote (DefaultRefTimeout when 0).
	Timeout time.Duration
	// TTL is how long an answer is kept (DefaultRefTTL when 0).
	TTL time.Duration
	// Protocols is GIT_ALLOW_PROTOCOL ("https" when ""; "file:https" lets
	// tests use local repositories).
	Protocols string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// CheckURL, when set, vets a library URL before it is asked (the
	// orchestrator refuses https hosts on its own machine or network
	// unless local source URLs are allowed: internal/netguard).
	CheckURL func(ctx context.Context, url string) error

	mu    sync.Mutex
	cache map[string]refAnswer
}

type refAnswer struct {
	commit string
	err    error
	at     time.Time
}

// Resolve returns the commit ref names in the library at url now. ref is
// what a workflow's `libraries:` gives: a branch, a tag or a full commit
// id (returned as is, it cannot move). An unreachable remote, a refused
// URL or a missing ref is an error, cached like an answer.
func (r *RefResolver) Resolve(ctx context.Context, url, ref string) (string, error) {
	if IsCommit(ref) {
		return ref, nil
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	ttl := r.TTL
	if ttl <= 0 {
		ttl = DefaultRefTTL
	}
	key := url + "\x00" + ref
	r.mu.Lock()
	if a, ok := r.cache[key]; ok && now().Sub(a.at) < ttl {
		r.mu.Unlock()
		return a.commit, a.err
	}
	r.mu.Unlock()
	commit, err := r.lsRemote(ctx, url, ref)
	r.mu.Lock()
	if r.cache == nil {
		r.cache = map[string]refAnswer{}
	}
	r.cache[key] = refAnswer{commit: commit, err: err, at: now()}
	r.mu.Unlock()
	return commit, err
}

func (r *RefResolver) lsRemote(ctx context.Context, url, ref string) (string, error) {
	if msg := CheckURL(url); msg != "" {
		return "", fmt.Errorf("library %s", msg)
	}
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \n\r\x00:^~?*[\\") || strings.Contains(ref, "..") {
		return "", fmt.Errorf("%q is not a valid ref", ref)
	}
	if r.CheckURL != nil {
		if err := r.CheckURL(ctx, url); err != nil {
			return "", err
		}
	}
	timeout, protocols := r.Timeout, r.Protocols
	if timeout <= 0 {
		timeout = DefaultRefTimeout
	}
	if protocols == "" {
		protocols = DefaultRefProtocols
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "ls-remote", "--", url)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_ALLOW_PROTOCOL="+protocols)
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("git ls-remote %s: no answer within %s", url, timeout)
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return "", fmt.Errorf("git ls-remote %s: %v: %s", url, err, msg)
	}
	return pickRef(string(out), ref)
}

// pickRef finds ref in ls-remote output the way `git fetch <url> <ref>`
// does at compile (git's ref rules: the name itself, refs/<name>,
// refs/tags/<name>, refs/heads/<name>), an annotated tag peeled to its
// commit.
func pickRef(out, ref string) (string, error) {
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		sha, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && IsCommit(sha) {
			refs[name] = sha
		}
	}
	for _, name := range []string{ref, "refs/" + ref, "refs/tags/" + ref, "refs/heads/" + ref} {
		if sha, ok := refs[name+"^{}"]; ok {
			return sha, nil
		}
		if sha, ok := refs[name]; ok {
			return sha, nil
		}
	}
	return "", fmt.Errorf("ref %s not found", ref)
}
