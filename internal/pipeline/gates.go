package pipeline

import (
	"context"
	"errors"
	"fmt"

	"kici.dev/kici/internal/ghapi"
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
		p.log.Warn("pipeline: commit message unreadable; commit-message gates see none", "sha", sha, "err", err)
	}
	ev.Files = local.FilesAt{Ctx: ctx, Repo: repo, SHA: sha}
}

// withForgeCommitMessage fills ev.CommitMessage from a push payload's
// head_commit.message (GitHub, Gitea, Forgejo); pull request payloads carry
// no commit message, so their gates see none.
func withForgeCommitMessage(ev *trigger.Event, payload map[string]any) {
	if ev.CommitMessage == "" {
		ev.CommitMessage = jsonStr(payload, "head_commit", "message")
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
