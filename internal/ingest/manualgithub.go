package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/store"
)

// gitHubTarget is where a manual run on a GitHub source runs: the full ref,
// its commit, the repository, its clone URL and the lock at that commit.
type gitHubTarget struct {
	ref, sha, repo, repoURL string
	lock                    *lockfile.LockFile
}

// manualGitHubTarget resolves a manual run's ref on a GitHub source through
// the REST API. A manual run has no webhook delivery, so an App source's
// installation is looked up with GET /repos/{owner}/{repo}/installation
// (the lookup forge status reporting uses); the ref defaults to the
// repository's default branch (GET /repos/{owner}/{repo}); a branch or tag
// name is resolved with GET /repos/{owner}/{repo}/commits/{ref} — branches
// first, as for local sources — and the lock is read at the resulting SHA.
// Errors: ErrRefNotFound naming the ref, ErrManualRunUnavailable (no
// repository given, App not installed, forge unreachable, lock problems).
func (p *Processor) manualGitHubTarget(ctx context.Context, src *store.Source, req ManualRun) (*gitHubTarget, error) {
	repo := strings.TrimSpace(req.Repo)
	if repo == "" {
		return nil, fmt.Errorf("%w: a github source needs the repository (--repo owner/repo)", ErrManualRunUnavailable)
	}
	set, err := p.st.GetSourceSettings(ctx, src.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && set.GitHub == nil) {
		return nil, fmt.Errorf("%w: source %s has no GitHub configuration", ErrManualRunUnavailable, src.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("settings of source %s: %w", src.ID, err)
	}
	client, err := p.forges().GitHubClient(set)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManualRunUnavailable, err)
	}
	var inst int64
	if client.IsApp() {
		inst, err = client.RepoInstallation(ctx, repo)
		var ae *ghapi.APIError
		if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: the GitHub App is not installed on %s (or the repository does not exist)", ErrManualRunUnavailable, repo)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the App installation of %s could not be read (try again later): %v", ErrManualRunUnavailable, repo, err)
		}
	}
	t := &gitHubTarget{repo: repo}
	ref := strings.TrimSpace(req.Ref)
	if ref == "" || !lockfetch.IsSHA(ref) {
		info, err := client.Repository(ctx, inst, repo)
		if errors.Is(err, ghapi.ErrNotFound) {
			return nil, fmt.Errorf("%w: repository %s does not exist or the source's credentials cannot see it", ErrManualRunUnavailable, repo)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: repository %s could not be read (try again later): %v", ErrManualRunUnavailable, repo, err)
		}
		t.repoURL = info.CloneURL
		if ref == "" {
			if info.DefaultBranch == "" {
				return nil, fmt.Errorf("%w: repository %s has no default branch; give --ref", ErrManualRunUnavailable, repo)
			}
			ref = "refs/heads/" + info.DefaultBranch
		}
	}
	if t.repoURL == "" {
		t.repoURL = "https://github.com/" + repo + ".git"
	}
	if t.ref, t.sha, err = resolveGitHubRef(ctx, client, inst, repo, ref); err != nil {
		return nil, err
	}
	if t.lock, err = p.gitHubLockAt(ctx, src, client, inst, &store.Run{RepoIdentifier: repo, SHA: t.sha}); err != nil {
		return nil, manualLockErr(err)
	}
	return t, nil
}

// resolveGitHubRef turns ref (SHA, full ref, or a branch or tag name —
// branch first, then tag, then an abbreviated SHA) into (full ref, SHA). A
// commit named by SHA has its SHA as the ref, as for local sources.
func resolveGitHubRef(ctx context.Context, client *ghapi.Client, inst int64, repo, ref string) (string, string, error) {
	var candidates []string
	switch {
	case lockfetch.IsSHA(ref):
		candidates = []string{ref}
	case strings.HasPrefix(ref, "refs/heads/") || strings.HasPrefix(ref, "refs/tags/"):
		candidates = []string{ref}
	case strings.HasPrefix(ref, "refs/"):
		return "", "", fmt.Errorf("%w: %q: only refs/heads/… and refs/tags/… can be run", ErrRefNotFound, ref)
	default:
		// A bare name after the branch and tag: an abbreviated SHA.
		candidates = []string{"refs/heads/" + ref, "refs/tags/" + ref, ref}
	}
	for _, c := range candidates {
		sha, err := client.CommitSHA(ctx, inst, repo, strings.TrimPrefix(c, "refs/"))
		if errors.Is(err, ghapi.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("%w: ref %q of %s could not be resolved (try again later): %v", ErrManualRunUnavailable, ref, repo, err)
		}
		if !strings.HasPrefix(c, "refs/") {
			return sha, sha, nil
		}
		return c, sha, nil
	}
	return "", "", fmt.Errorf("%w: %q names no branch, tag or commit of %s", ErrRefNotFound, ref, repo)
}
