package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// rerunLock reads the lock of orig's repository at orig.SHA through the
// reader the pipeline uses for src's kind: the local repository (local),
// the REST contents API with the source's App installation token or token
// (github), or a shallow git fetch of the lock (generic sources with a
// git configuration, i.e. universal-git). Errors that make the rerun
// impossible are wrapped in ErrRerunUnavailable with the reason (lock gone
// at that SHA, corrupt or over the cap, no installation id, forge
// unreachable); store errors are returned as is.
func (p *Processor) rerunLock(ctx context.Context, orig *store.Run, src *store.Source) (*lockfile.LockFile, error) {
	if !lockfetch.IsSHA(orig.SHA) {
		return nil, fmt.Errorf("%w: the run has no commit SHA (%q)", ErrRerunUnavailable, orig.SHA)
	}
	switch src.Provider {
	case provider.Local:
		repo, err := p.localRepo(src.LocalPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
		}
		var tr Trace
		lf, err := p.localLock(ctx, src, repo, orig.SHA, &tr)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
		case lf == nil:
			return nil, fmt.Errorf("%w: lock file at %s: %s", ErrRerunUnavailable, orig.SHA, tr.Summary)
		}
		return lf, nil
	case provider.GitHub:
		return p.rerunGitHubLock(ctx, orig, src)
	case provider.Generic:
		set, err := p.st.GetSourceSettings(ctx, src.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("settings of source %s: %w", src.ID, err)
		}
		if set == nil || set.Git == nil {
			return nil, fmt.Errorf("%w: source %s has no git configuration, so its lock cannot be read", ErrRerunUnavailable, src.ID)
		}
		g := set.Git
		repoURL, err := lockfetch.RepoURL(g.GitURLTemplate, orig.RepoIdentifier)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
		}
		var auth *lockfetch.GitAuth
		if g.CredentialType != "" {
			auth = &lockfetch.GitAuth{Username: g.Username, Secret: g.Credential}
		}
		res, err := p.forges().Locks.Get(ctx, "universal:"+src.ID, orig.RepoIdentifier, orig.SHA, func(ctx context.Context, maxBytes int64) ([]byte, error) {
			return lockfetch.FetchGitLock(ctx, repoURL, orig.SHA, maxBytes, auth)
		})
		return rerunResult(res, err, orig)
	}
	return nil, fmt.Errorf("%w: source provider %q has no lock reader", ErrRerunUnavailable, src.Provider)
}

// rerunGitHubLock reads the lock at orig.SHA through the source's REST
// client. An App source needs the installation id: it is taken from the
// payload of the delivery that created the run, or — for a rerun, which
// has no delivery — of the run that started the rerun chain.
func (p *Processor) rerunGitHubLock(ctx context.Context, orig *store.Run, src *store.Source) (*lockfile.LockFile, error) {
	set, err := p.st.GetSourceSettings(ctx, src.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: source %s has no GitHub configuration", ErrRerunUnavailable, src.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("settings of source %s: %w", src.ID, err)
	}
	fg := p.forges()
	client, err := fg.GitHubClient(set)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRerunUnavailable, err)
	}
	var inst int64
	if client.IsApp() {
		if inst, err = p.installationOf(ctx, orig); err != nil {
			return nil, err
		}
		if inst <= 0 {
			return nil, fmt.Errorf("%w: no GitHub App installation id is known for this run (its delivery carries none)", ErrRerunUnavailable)
		}
	}
	return p.gitHubLockAt(ctx, src, client, inst, orig)
}

// gitHubLockAt reads the lock of orig.RepoIdentifier at orig.SHA through
// client (with installation inst for an App), via the lock cache.
func (p *Processor) gitHubLockAt(ctx context.Context, src *store.Source, client *ghapi.Client, inst int64, orig *store.Run) (*lockfile.LockFile, error) {
	repo, sha := orig.RepoIdentifier, orig.SHA
	res, err := p.forges().Locks.Get(ctx, "github:"+src.ID, repo, sha, gitHubLockFetch(client, inst, repo, sha))
	return rerunResult(res, err, orig)
}

// installationOf returns the GitHub App installation id in the payload of
// the delivery behind orig (or behind the root of its rerun chain); 0 when
// there is none (an internal event, a pruned delivery).
func (p *Processor) installationOf(ctx context.Context, orig *store.Run) (int64, error) {
	deliveryID := orig.DeliveryID
	if deliveryID == "" {
		l, err := p.st.GetRunLink(ctx, orig.ID)
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		root, err := p.st.GetRun(ctx, l.OriginalRunID)
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		deliveryID = root.DeliveryID
	}
	if deliveryID == "" {
		return 0, nil
	}
	d, err := p.st.GetDelivery(ctx, deliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var payload map[string]any
	if json.Unmarshal(d.Payload, &payload) != nil {
		return 0, nil
	}
	return jsonInt(payload, "installation", "id"), nil
}

// rerunResult maps a lock-cache outcome to the lock or a rerun error.
func rerunResult(res lockfetch.Result, err error, orig *store.Run) (*lockfile.LockFile, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: the forge could not be reached to read the lock of %s at %s (try again later): %v",
			ErrRerunUnavailable, orig.RepoIdentifier, orig.SHA, err)
	}
	switch res.Status {
	case lockfetch.StatusOK:
		return res.Lock, nil
	case lockfetch.StatusMissing:
		return nil, fmt.Errorf("%w: lock file at %s: %s is gone from %s at that commit", ErrRerunUnavailable, orig.SHA, lockfetch.LockPath, orig.RepoIdentifier)
	case lockfetch.StatusCorrupt:
		return nil, fmt.Errorf("%w: invalid lock file at %s: %s", ErrRerunUnavailable, orig.SHA, res.Detail)
	default:
		return nil, fmt.Errorf("%w: lock file at %s: %s", ErrRerunUnavailable, orig.SHA, res.Detail)
	}
}
