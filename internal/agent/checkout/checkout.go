// Package checkout fetches one exact commit of a repository into an empty
// directory with the git CLI (see docs/kici-compatibility.md#agent),
// using an isolated git configuration and keeping credentials out of URLs,
// argv and every message it produces.
package checkout

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"kici.dev/kici/internal/protocol"
)

// DefaultTimeout bounds a whole checkout when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Options describes one checkout.
type Options struct {
	// RepoURL is a file://, http:// or https:// URL without user info.
	RepoURL string
	// SHA is the full commit id (40 or 64 hex digits) to check out.
	SHA string
	// Dir is the target directory; it is created if missing and must be
	// empty.
	Dir string
	// Auth, if set, is sent as an HTTP Authorization header (kind "basic"
	// only). It is passed to git through GIT_CONFIG_* environment entries,
	// never argv.
	Auth *protocol.SourceAuth
	// Log receives progress and git output lines, already scrubbed of
	// credentials. May be nil.
	Log func(line string)
	// Timeout bounds the checkout (DefaultTimeout when zero).
	Timeout time.Duration
	// GitPath is the git binary ("git" from PATH when empty).
	GitPath string
	// PathEnv is the PATH used for git (the agent's PATH when empty).
	PathEnv string
	// MirrorRoot, when set, is the host's mirror cache directory: the
	// commit is fetched into a bare mirror of the repository kept there
	// and the work tree borrows its objects (mirror.go). A mirror that
	// cannot be used falls back to a direct fetch.
	MirrorRoot string
}

var shaRE = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// ValidateSHA returns an error unless sha is a full lowercase hex commit id.
func ValidateSHA(sha string) error {
	if !shaRE.MatchString(sha) {
		return fmt.Errorf("checkout: invalid commit sha %q (want 40 or 64 lowercase hex digits)", truncate(sha, 80))
	}
	return nil
}

// ValidateRepoURL accepts only file://, http:// and https:// URLs with a
// host (or a path for file://) and no user info. It refuses everything else,
// including git's ext:: and fd:: transports, scp-like "host:path" forms, bare
// paths and anything that starts with '-' (option injection). The error text
// never contains user info.
func ValidateRepoURL(raw string) error {
	if raw == "" {
		return errors.New("checkout: empty repository URL")
	}
	if strings.HasPrefix(raw, "-") {
		return errors.New("checkout: repository URL must not start with '-'")
	}
	if strings.ContainsAny(raw, "\x00\r\n \t") {
		return errors.New("checkout: repository URL contains whitespace or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("checkout: repository URL does not parse")
	}
	if u.User != nil {
		return fmt.Errorf("checkout: repository URL %s embeds credentials; send them as source auth instead", redact(raw))
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" || u.Host != "" && u.Host != "localhost" {
			return errors.New("checkout: file:// URL must be file:///absolute/path")
		}
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("checkout: %s URL has no host", u.Scheme)
		}
	default:
		return fmt.Errorf("checkout: unsupported repository URL scheme %q (want file, http or https)", truncate(u.Scheme, 20))
	}
	return nil
}

// Run checks out opts.SHA into opts.Dir: git init, a shallow fetch of the
// exact commit (falling back to a full fetch of branches and tags when the
// server refuses to serve an unadvertised commit), a detached checkout, and a
// check that HEAD equals the commit. Errors name the failing git command and
// carry git's (scrubbed) output.
func Run(ctx context.Context, opts Options) error {
	if err := ValidateRepoURL(opts.RepoURL); err != nil {
		return err
	}
	if err := ValidateSHA(opts.SHA); err != nil {
		return err
	}
	if opts.Auth != nil && opts.Auth.Kind != "" && opts.Auth.Kind != protocol.AuthBasic {
		return fmt.Errorf("checkout: unsupported source auth kind %q (only basic)", opts.Auth.Kind)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	g := newGit(opts)
	logf := func(format string, a ...any) {
		if opts.Log != nil {
			opts.Log(g.scrub(fmt.Sprintf(format, a...)))
		}
	}
	logf("Checking out %s at %s", redact(opts.RepoURL), opts.SHA)

	if opts.MirrorRoot != "" {
		mirror, err := ensureMirror(ctx, g, opts, logf)
		if err == nil {
			err = checkoutFromMirror(ctx, g, opts, mirror)
		}
		if err == nil {
			return verifyDetachedHead(ctx, g, opts, logf)
		}
		if ctx.Err() != nil {
			return err
		}
		logf("Host mirror unusable (%v); fetching directly", err)
		if err := resetDir(opts.Dir); err != nil {
			return fmt.Errorf("checkout: %w", err)
		}
	}
	steps := [][]string{
		{"init", "-q"},
		{"remote", "add", "origin", opts.RepoURL},
	}
	for _, args := range steps {
		if err := g.run(ctx, args...); err != nil {
			return err
		}
	}
	if err := g.run(ctx, "fetch", "--no-tags", "--depth", "1", "origin", opts.SHA); err != nil {
		if ctx.Err() != nil {
			return err
		}
		logf("Shallow fetch of %s refused; fetching all branches and tags", opts.SHA)
		if err2 := g.run(ctx, "fetch", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"); err2 != nil {
			return err2
		}
	}
	if err := g.run(ctx, "checkout", "-q", "--detach", opts.SHA); err != nil {
		return err
	}
	return verifyHead(ctx, g, opts, logf)
}

// verifyHead checks that the work tree's HEAD is the commit asked for.
// verifyDetachedHead is verifyHead for a work tree just checked out with
// --detach, whose .git/HEAD then holds the commit id itself: reading the
// file spares a git process; anything else asks git.
func verifyDetachedHead(ctx context.Context, g *git, opts Options, logf func(string, ...any)) error {
	if b, err := os.ReadFile(filepath.Join(opts.Dir, ".git", "HEAD")); err == nil && strings.TrimSpace(string(b)) == opts.SHA {
		logf("HEAD is now at %s", opts.SHA)
		return nil
	}
	return verifyHead(ctx, g, opts, logf)
}

func verifyHead(ctx context.Context, g *git, opts Options, logf func(string, ...any)) error {
	head, err := g.output(ctx, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if head != opts.SHA {
		return fmt.Errorf("checkout: HEAD is %s, expected %s", head, opts.SHA)
	}
	logf("HEAD is now at %s", head)
	return nil
}

// resetDir empties dir (after a failed mirror checkout) and recreates it.
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

type git struct {
	opts    Options
	env     []string
	secrets []string
}

func newGit(opts Options) *git {
	path := opts.PathEnv
	if path == "" {
		path = os.Getenv("PATH")
	}
	// Isolated configuration: no user/system config, no prompts, and only
	// the file/http/https transports (also for submodules and redirects).
	cfg := [][2]string{
		{"protocol.allow", "never"},
		{"protocol.file.allow", "always"},
		{"protocol.http.allow", "always"},
		{"protocol.https.allow", "always"},
		{"init.defaultBranch", "main"},
		{"advice.detachedHead", "false"},
		{"core.hooksPath", os.DevNull},
	}
	g := &git{opts: opts}
	if a := opts.Auth; a != nil && (a.User != "" || a.Secret != "") {
		token := base64.StdEncoding.EncodeToString([]byte(a.User + ":" + a.Secret))
		cfg = append(cfg, [2]string{"http.extraHeader", "Authorization: Basic " + token})
		g.secrets = append(g.secrets, token, a.User+":"+a.Secret)
		if len(a.Secret) >= 3 {
			g.secrets = append(g.secrets, a.Secret)
		}
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + os.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_ALLOW_PROTOCOL=file:http:https",
		"LC_ALL=C",
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfg)),
	}
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	g.env = env
	return g
}

// scrub removes every credential form from s.
func (g *git) scrub(s string) string {
	for _, sec := range g.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	// The host's mirror cache lies outside the job's sandbox: its path is
	// a host detail the job's readers (fork authors included) do not get.
	if g.opts.MirrorRoot != "" {
		s = strings.ReplaceAll(s, g.opts.MirrorRoot, "<host mirrors>")
	}
	return s
}

func (g *git) cmd(ctx context.Context, args ...string) *exec.Cmd {
	bin := g.opts.GitPath
	if bin == "" {
		bin = "git"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = g.opts.Dir
	cmd.Env = g.env
	cmd.WaitDelay = 5 * time.Second
	// git runs helpers (git-remote-http, ssh) that hold the output pipes:
	// a cancel kills git's whole process group, not just git.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

func (g *git) describe(args []string) string {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = redact(a)
	}
	return g.scrub("git " + strings.Join(shown, " "))
}

func (g *git) run(ctx context.Context, args ...string) error {
	desc := g.describe(args)
	if g.opts.Log != nil {
		g.opts.Log("$ " + desc)
	}
	var out bytes.Buffer
	cmd := g.cmd(ctx, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	text := strings.TrimRight(g.scrub(out.String()), "\n")
	if g.opts.Log != nil && text != "" {
		for _, line := range strings.Split(text, "\n") {
			g.opts.Log(line)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("checkout: %s: %v", desc, ctx.Err())
		}
		return fmt.Errorf("checkout: %s failed: %s: %s", desc, g.scrub(err.Error()), truncate(lastLines(text, 5), 2000))
	}
	return nil
}

func (g *git) output(ctx context.Context, args ...string) (string, error) {
	cmd := g.cmd(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("checkout: %s failed: %s", g.describe(args), truncate(g.scrub(stderr.String()), 2000))
	}
	return strings.TrimSpace(string(out)), nil
}

// redact removes user info from anything that parses as a URL with user
// info; an unparsable string containing '@' after "://" is replaced whole.
func redact(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "<redacted URL>"
	}
	if u.User != nil {
		u.User = nil
		return u.String()
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
