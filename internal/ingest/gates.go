package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/provider/local"
	"kici.dev/kici/internal/trigger"
)

// withLocalGates gives a local push event what the trigger gates read: the
// head commit's message (commitMessage, `[skip ci]`) and a reader of the
// files at that commit (requires). A commit message that cannot be read
// leaves the field empty: the `[skip ci]` rule then does not skip, and a
// commitMessage gate fails with the value "(missing)".
func (p *Processor) withLocalGates(ctx context.Context, repo *local.Repo, sha string, ev *trigger.Event) {
	if msg, err := repo.CommitMessage(ctx, sha); err == nil {
		ev.CommitMessage = msg
	} else {
		p.log.Warn("ingest: commit message unreadable; commit-message gates see none", "sha", sha, "err", err)
	}
	ev.Files = local.FilesAt{Ctx: ctx, Repo: repo, SHA: sha}
}

// withForgeCommitMessage fills ev.CommitMessage from a push payload's
// head_commit.message (GitHub, Gitea, Forgejo) or, without one, from the
// entry of its commits list that is the pushed head (GitLab's
// checkout_sha); pull request payloads carry
// no commit message, so their gates read it through ev.LoadCommitMessage
// (githubCommitMessage, gitGates).
func withForgeCommitMessage(ev *trigger.Event, payload map[string]any) {
	if ev.CommitMessage == "" {
		ev.CommitMessage = jsonStr(payload, "head_commit", "message")
	}
	if ev.CommitMessage != "" {
		return
	}
	// GitLab pushes have no head_commit: the pushed head is the entry of
	// commits whose id is checkout_sha (or after).
	head := jsonStr(payload, "checkout_sha")
	if head == "" {
		head = jsonStr(payload, "after")
	}
	commits, _ := payload["commits"].([]any)
	for _, c := range commits {
		if m, _ := c.(map[string]any); m != nil && head != "" && m["id"] == head {
			ev.CommitMessage, _ = m["message"].(string)
		}
	}
}

// githubFiles reads `requires` files of a GitHub event's commit through the
// contents API (GET /repos/{repo}/contents/{path}?ref=<sha>), as the
// installation, at most local.MaxGateFileBytes each.
type githubFiles struct {
	ctx    context.Context
	client *ghapi.Client
	inst   int64
	repo   string
	sha    string
}

// ReadFile implements trigger.FileReader.
func (g githubFiles) ReadFile(p string) ([]byte, error) {
	data, err := g.client.GetFile(g.ctx, g.inst, g.repo, p, g.sha, local.MaxGateFileBytes)
	switch {
	case errors.Is(err, ghapi.ErrNotFound):
		return nil, fmt.Errorf("%s: %w", p, trigger.ErrFileNotFound)
	case errors.Is(err, ghapi.ErrTooLarge):
		return nil, fmt.Errorf("%s is larger than %d bytes", p, local.MaxGateFileBytes)
	}
	return data, err
}

// githubCommitMessage reads the message of a GitHub event's head commit
// (a pull request's head) through the git commits API, for the gates.
func githubCommitMessage(ctx context.Context, client *ghapi.Client, inst int64, repo, sha string) func() (string, error) {
	return func() (string, error) { return client.CommitMessage(ctx, inst, repo, sha) }
}

// gitGates gives a universal-git event's gates what they read of its
// commit, through git as the lock fetch does: one shallow, blob-less
// fetch of the commit on first use (lockfetch.OpenGitCommit), then the
// message and each `requires` file from it, at most
// local.MaxGateFileBytes each. close removes the fetched repository.
type gitGates struct {
	ctx  context.Context
	url  string
	sha  string
	auth *lockfetch.GitAuth

	once   sync.Once
	commit *lockfetch.GitCommit
	err    error
}

func (g *gitGates) open() (*lockfetch.GitCommit, error) {
	g.once.Do(func() {
		g.commit, g.err = lockfetch.OpenGitCommit(g.ctx, g.url, g.sha, g.auth)
		if g.err != nil {
			g.err = fmt.Errorf("fetching commit %s: %w", g.sha, g.err)
		}
	})
	return g.commit, g.err
}

// ReadFile implements trigger.FileReader.
func (g *gitGates) ReadFile(p string) ([]byte, error) {
	c, err := g.open()
	if err != nil {
		return nil, err
	}
	data, err := c.ReadFile(g.ctx, p, local.MaxGateFileBytes)
	switch {
	case errors.Is(err, lockfetch.ErrMissing):
		return nil, fmt.Errorf("%s: %w", p, trigger.ErrFileNotFound)
	case errors.Is(err, lockfetch.ErrTooLarge):
		return nil, fmt.Errorf("%s is larger than %d bytes", p, local.MaxGateFileBytes)
	}
	return data, err
}

// message is the commit's message, for trigger.Event.LoadCommitMessage.
func (g *gitGates) message() (string, error) {
	c, err := g.open()
	if err != nil {
		return "", err
	}
	return c.Message(g.ctx)
}

// close removes the fetched commit, if any.
func (g *gitGates) close() {
	if g.commit != nil {
		_ = g.commit.Close()
	}
}
