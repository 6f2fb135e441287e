package pipeline

import (
	"context"

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
