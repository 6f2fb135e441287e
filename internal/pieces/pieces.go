// Package pieces reads the files of reusable workflow pieces for `kici
// compile`: files of the repository being compiled, and files of library
// repositories at a pinned ref, fetched with git into a local cache. It
// knows nothing of the workflow language; internal/lockfile expands what it
// reads.
package pieces

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// MaxPieceBytes bounds one piece file: 1 MiB, as a workflow file.
const MaxPieceBytes = 1 << 20

// FetchTimeout bounds one `git fetch` of a library.
const FetchTimeout = 2 * time.Minute

// CacheEnv names the environment variable that overrides the library cache
// directory (default: the user cache directory + "/kici/libraries").
const CacheEnv = "KICI_LIBRARY_CACHE"

// ErrNotFound (wrapped) means the piece file does not exist at the ref.
var ErrNotFound = errors.New("no such piece file")

// File is one piece file as read.
type File struct {
	// Data is the file's content.
	Data []byte
	// Commit is the library commit the file was read at; "" for a file of
	// the repository being compiled.
	Commit string
}

// Resolver reads piece files for one compile. Library fetches are done
// once per (url, ref) and remembered, so a compile sees one commit per
// library even if the remote moves meanwhile.
type Resolver struct {
	// Root is the repository being compiled.
	Root string
	// CacheDir holds one bare repository per library URL.
	CacheDir string

	commits map[string]string
}

// NewResolver returns a Resolver for the repository at root, with the
// library cache under $KICI_LIBRARY_CACHE or the user cache directory.
func NewResolver(root string) *Resolver {
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		if c, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(c, "kici", "libraries")
		} else {
			dir = filepath.Join(os.TempDir(), "kici-libraries")
		}
	}
	return &Resolver{Root: root, CacheDir: dir}
}

// CleanPath checks a repository-relative piece path: forward slashes, no
// empty, "." or ".." segments, not absolute. It returns a message or "".
func CleanPath(p string) string {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return fmt.Sprintf("%q must be a relative path with / separators", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("%q must not have empty, . or .. segments", p)
		}
	}
	if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" {
		return fmt.Sprintf("%q is not a .yaml or .yml file", p)
	}
	return ""
}

// Local reads a piece file of the repository being compiled. A symlink
// that leads out of the repository is refused.
func (r *Resolver) Local(p string) (*File, error) {
	if msg := CleanPath(p); msg != "" {
		return nil, errors.New(msg)
	}
	full := filepath.Join(r.Root, filepath.FromSlash(p))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
		}
		return nil, err
	}
	root, err := filepath.EvalSymlinks(r.Root)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s leads out of the repository", p)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > MaxPieceBytes {
		return nil, fmt.Errorf("%s is %d bytes; a piece file may be at most %d bytes", p, fi.Size(), MaxPieceBytes)
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return nil, err
	}
	return &File{Data: data}, nil
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsCommit reports whether ref is a full 40-hex commit id.
func IsCommit(ref string) bool { return commitRE.MatchString(ref) }

// CheckURL accepts the library URLs kici fetches: https://, ssh://,
// scp-like user@host:path, and file:// or an absolute path (a repository on
// this machine). Other schemes (ext::, fd::, http://) are refused: git's
// remote helpers can run commands.
func CheckURL(u string) string {
	switch {
	case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "ssh://"), strings.HasPrefix(u, "file:///"):
	case strings.HasPrefix(u, "/"):
	case regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]`).MatchString(u):
	default:
		return fmt.Sprintf("%q: a library URL must be https://, ssh://, user@host:path, file:/// or an absolute path", u)
	}
	if strings.HasPrefix(u, "-") || strings.ContainsAny(u, "\n\r\x00 ") {
		return fmt.Sprintf("%q is not a valid git URL", u)
	}
	return ""
}

// Library reads the piece file p of the library at url, ref. ref is a
// branch, a tag or a full commit id; the commit it resolves to is fetched
// once per compile and returned with the file.
func (r *Resolver) Library(ctx context.Context, url, ref, p string) (*File, error) {
	if msg := CheckURL(url); msg != "" {
		return nil, errors.New(msg)
	}
	if msg := CleanPath(p); msg != "" {
		return nil, errors.New(msg)
	}
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \n\r\x00:^~?*[\\") || strings.Contains(ref, "..") {
		return nil, fmt.Errorf("%q is not a valid ref", ref)
	}
	commit, dir, err := r.resolve(ctx, url, ref)
	if err != nil {
		return nil, err
	}
	out, err := r.git(ctx, dir, "cat-file", "-s", commit+":"+p)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", p, commit[:12], ErrNotFound)
	}
	var size int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &size); err != nil {
		return nil, fmt.Errorf("%s at %s: size %q: %w", p, commit[:12], out, err)
	}
	if size > MaxPieceBytes {
		return nil, fmt.Errorf("%s is %d bytes; a piece file may be at most %d bytes", p, size, MaxPieceBytes)
	}
	data, err := r.git(ctx, dir, "cat-file", "blob", commit+":"+p)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", p, commit[:12], ErrNotFound)
	}
	return &File{Data: data, Commit: commit}, nil
}

// resolve fetches ref of url into the cache (once per Resolver) and
// returns its commit and the cache repository.
func (r *Resolver) resolve(ctx context.Context, url, ref string) (string, string, error) {
	sum := sha256.Sum256([]byte(url))
	dir := filepath.Join(r.CacheDir, hex.EncodeToString(sum[:12])+".git")
	key := url + "\x00" + ref
	if c, ok := r.commits[key]; ok {
		return c, dir, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", "", fmt.Errorf("library cache: %w", err)
		}
		if _, err := r.git(ctx, dir, "init", "--bare", "-q"); err != nil {
			return "", "", err
		}
	}
	var commit string
	if IsCommit(ref) {
		// A pinned commit already in the cache needs no network.
		if out, err := r.git(ctx, dir, "cat-file", "-t", ref); err == nil && strings.TrimSpace(string(out)) == "commit" {
			commit = ref
		}
	}
	if commit == "" {
		fctx, cancel := context.WithTimeout(ctx, FetchTimeout)
		defer cancel()
		if _, err := r.git(fctx, dir, "fetch", "-q", "--no-tags", "--", url, ref); err != nil {
			return "", "", fmt.Errorf("fetch library %s at %s: %w", url, ref, err)
		}
		out, err := r.git(ctx, dir, "rev-parse", "--verify", "FETCH_HEAD^{commit}")
		if err != nil {
			return "", "", err
		}
		commit = strings.TrimSpace(string(out))
		if IsCommit(ref) && commit != ref {
			return "", "", fmt.Errorf("library %s: fetching %s gave commit %s", url, ref, commit)
		}
		// Keep the commit reachable for the next compile's offline use.
		_, _ = r.git(ctx, dir, "update-ref", "refs/kici/"+commit, commit)
	}
	if r.commits == nil {
		r.commits = map[string]string{}
	}
	r.commits[key] = commit
	return commit, dir, nil
}

// git runs git in dir with no prompts and no user or system configuration
// that could run commands (hooks, helpers from ~/.gitconfig still apply to
// credentials: the author's own access is what fetches their libraries).
func (r *Resolver) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "GIT_CONFIG_NOSYSTEM=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 400 {
			msg = msg[:400] + "…"
		}
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, msg)
	}
	return out, nil
}
