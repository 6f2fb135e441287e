package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// The mirror cache. With Options.MirrorRoot set, a checkout keeps one bare
// mirror of each repository URL on the host (<MirrorRoot>/<sha256 of the
// URL>.git) and fetches into it only what it lacks, with full history, so
// the next job of the repository fetches a few new objects or nothing at
// all. The job's work tree is then a fresh repository that borrows the
// mirror's objects through objects/info/alternates (git clone --reference)
// and checks the commit out from them: no object is copied and nothing is
// sent over the network when the mirror has the commit.
//
// Concurrent jobs, in any number of agent processes of the host, are safe:
// every change to a mirror happens under an exclusive flock on its lock
// file, a new mirror is built in a temporary directory and renamed into
// place, automatic gc and pruning are off in mirrors (so no object a work
// tree borrows ever disappears), and a work tree only reads the mirror.
// Credentials never reach the mirror: the URL carries none
// (ValidateRepoURL) and the Authorization header travels in GIT_CONFIG_*
// environment entries of the fetch, not in the mirror's configuration.
// The cache directory is 0700, so steps running as another user cannot
// write into it.

// mirrorPath names the mirror of a repository URL under root.
func mirrorPath(root, repoURL string) string {
	sum := sha256.Sum256([]byte(repoURL))
	return filepath.Join(root, hex.EncodeToString(sum[:16])+".git")
}

// lockFile takes an exclusive flock on path (created 0600), waiting for
// ctx; the returned func releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, err
		}
		return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
	case <-ctx.Done():
		// Closing the file releases the lock the goroutine may still get.
		go func() { <-done; f.Close() }()
		return nil, ctx.Err()
	}
}

// ensureMirror makes the host mirror of opts.RepoURL hold opts.SHA and
// returns its path.
func ensureMirror(ctx context.Context, g *git, opts Options, logf func(string, ...any)) (string, error) {
	if err := os.MkdirAll(opts.MirrorRoot, 0o700); err != nil {
		return "", err
	}
	mirror := mirrorPath(opts.MirrorRoot, opts.RepoURL)
	unlock, err := lockFile(ctx, mirror+".lock")
	if err != nil {
		return "", fmt.Errorf("lock mirror: %w", err)
	}
	defer unlock()

	if _, err := os.Stat(filepath.Join(mirror, "HEAD")); err != nil {
		tmp, err := os.MkdirTemp(opts.MirrorRoot, ".new-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		for _, args := range [][]string{
			{"init", "-q", "--bare", tmp},
			{"--git-dir", tmp, "config", "gc.auto", "0"},
			{"--git-dir", tmp, "config", "gc.pruneExpire", "never"},
			{"--git-dir", tmp, "config", "maintenance.auto", "false"},
		} {
			if err := g.run(ctx, args...); err != nil {
				return "", err
			}
		}
		_ = os.RemoveAll(mirror) // a half-built leftover without HEAD
		if err := os.Rename(tmp, mirror); err != nil {
			return "", err
		}
		logf("Created the host mirror of %s", redact(opts.RepoURL))
	}
	if mirrored(mirror, opts.SHA) || g.hasCommit(ctx, mirror, opts.SHA) {
		logf("Host mirror already has %s", opts.SHA)
		return mirror, nil
	}
	// The commit itself first (what forges serve for a pushed SHA), else
	// every branch and tag.
	// Fetched objects stay in packs (fetch.unpackLimit=1; git's default
	// loosens fetches of under 100 objects), which a checkout for a step
	// user links rather than copies (Detach).
	if err := g.run(ctx, "--git-dir", mirror, "-c", "fetch.unpackLimit=1", "fetch", "-q", "--no-tags", "--no-write-fetch-head", opts.RepoURL, opts.SHA); err != nil || !g.hasCommit(ctx, mirror, opts.SHA) {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		logf("Fetch of %s into the host mirror refused; fetching all branches and tags", opts.SHA)
		if err := g.run(ctx, "--git-dir", mirror, "-c", "fetch.unpackLimit=1", "fetch", "-q", "--no-write-fetch-head", opts.RepoURL,
			"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
			return "", err
		}
	}
	if !g.hasCommit(ctx, mirror, opts.SHA) {
		return "", fmt.Errorf("checkout: commit %s not found in %s", opts.SHA, redact(opts.RepoURL))
	}
	// Keep the fetched commit reachable in the mirror, so nothing ever
	// considers it garbage.
	if err := g.run(ctx, "--git-dir", mirror, "update-ref", "refs/kici/"+opts.SHA, opts.SHA); err != nil {
		return "", err
	}
	return mirror, nil
}

// hasCommit reports whether the repository at gitDir holds commit sha.
// mirrored reports whether the mirror holds refs/kici/<sha>, which is
// written only once the commit is in it (and mirrors never prune): a warm
// checkout then costs a stat instead of a git process.
func mirrored(mirror, sha string) bool {
	_, err := os.Stat(filepath.Join(mirror, "refs", "kici", sha))
	return err == nil
}

func (g *git) hasCommit(ctx context.Context, gitDir, sha string) bool {
	_, err := g.output(ctx, "--git-dir", gitDir, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// checkoutFromMirror builds the work tree in opts.Dir from the mirror:
// a new repository whose object store borrows the mirror's, origin set to
// the repository URL (for steps that fetch more), the commit checked out
// detached.
func checkoutFromMirror(ctx context.Context, g *git, opts Options, mirror string) error {
	if made, err := initRepository(opts.Dir); err != nil {
		return fmt.Errorf("checkout: %w", err)
	} else if !made {
		if err := g.run(ctx, "init", "-q"); err != nil {
			return err
		}
	}
	alt := filepath.Join(opts.Dir, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(mirror, "objects")+"\n"), 0o644); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	if err := addOrigin(opts.Dir, opts.RepoURL); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	return g.run(ctx, "checkout", "-q", "--detach", opts.SHA)
}

// initRepository writes the repository `git init` would create in a new
// directory on Linux — HEAD, a config with the core settings git
// detects there, and empty object and ref directories — sparing a git
// process per checkout. It does nothing and returns false where `git init`
// must run instead: when dir/.git exists (git init then keeps what is
// there), or on another system (git probes case folding and Unicode
// normalisation of the file system, e.g. on macOS).
func initRepository(dir string) (bool, error) {
	if runtime.GOOS != "linux" {
		return false, nil
	}
	gitDir := filepath.Join(dir, ".git")
	if err := os.Mkdir(gitDir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return false, err
		}
	}
	files := map[string]string{
		"HEAD":   "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(content), 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

// addOrigin writes what `git remote add origin <url>` writes into the work
// tree's .git/config, without a git process: the url (validated: no
// whitespace or control characters; quoted, with \ and " escaped, so #
// and ; stay literal) and the default fetch refspec.
func addOrigin(dir, repoURL string) error {
	quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(repoURL)
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "[remote \"origin\"]\n\turl = \"%s\"\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", quoted)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
