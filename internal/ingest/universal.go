package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"kici.dev/kici/internal/lockfetch"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/universal"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// handleUniversal processes a delivery of a universal-git source: the
// preset (or custom mapping) normalizes it, the lock is fetched with a
// shallow, blob-less git fetch of the event's lock ref from the clone URL
// built from the source's template (KiCI's universal-git; see
// docs/kici-compatibility.md#ingress), the workflows are
// matched and runs created. Universal-git has no permission API: a pull
// request from a fork uses the base branch's lock, and the org's fork
// policy applies to it as to GitHub's.
func (p *Processor) handleUniversal(ctx context.Context, d *store.Delivery, src *store.Source, g *store.GitConfig, b *stagedRuns) (*Trace, error) {
	tr := &Trace{Event: d.Event}
	cfg := universal.Config{Preset: g.Preset, PayloadPaths: g.PayloadPaths, EventMapping: g.EventMapping}
	ev, lref, err := universal.Normalize(cfg, d.Event, d.Payload)
	if errors.Is(err, provider.ErrUnsupportedEvent) {
		tr.Summary = "ignored: " + err.Error()
		return tr, nil
	}
	if err != nil {
		return tr, err
	}
	repo := ev.SourceRepo
	if repo == "" {
		tr.Summary = "the event names no repository; nothing to run"
		return tr, nil
	}
	repoURL, err := lockfetch.RepoURL(g.GitURLTemplate, repo)
	if err != nil {
		return tr, err
	}
	if p.handleKiciComment(ctx, tr, src, ev, jsonStr(ev.Payload, "comment", "body")) {
		return tr, nil
	}
	var payload map[string]any
	_ = json.Unmarshal(d.Payload, &payload)
	forkPolicy, fork, stop := p.screenForgeEvent(ctx, tr, src, ev)
	if stop {
		return tr, nil
	}
	lockRef, lockSource := lref.Ref, ""
	var notes []string
	var commit *commitEvent
	if namesCommitOnly(ev, lref) {
		defaultBranch := jsonStr(payload, "repository", "default_branch")
		ce, ignored := p.decideCommitEvent(ctx, tr, src.OrgID, ev, lref, defaultBranch)
		if ignored {
			return tr, nil
		}
		commit = &ce
		// The commit's own lock may be anyone's (commitevents.go).
		notes = append(notes, ce.note)
		lockRef, lockSource = defaultBranch, "base"
		if lockRef == "" {
			lockRef = provider.HEAD
		}
	}
	if fork {
		base, note := forkBaseLock(forkPolicy, ev, lref)
		notes = append(notes, note)
		lockRef, lockSource = base, "base"
	}
	var auth *lockfetch.GitAuth
	if g.CredentialType != "" {
		auth = &lockfetch.GitAuth{Username: g.Username, Secret: g.Credential}
	}
	tr.Ref, tr.SHA = jsonStr(payload, "ref"), lockRef
	res, err := p.forges().Locks.Get(ctx, "universal:"+src.ID, repo, lockRef, func(ctx context.Context, maxBytes int64) ([]byte, error) {
		return lockfetch.FetchGitLock(ctx, repoURL, lockRef, maxBytes, auth)
	})
	if err != nil {
		return tr, fmt.Errorf("fetch lock of %s at %q: %w", repo, lockRef, err)
	}
	lf, err := usableLock(tr, res, lockRef, notes)
	if lf == nil {
		return tr, err
	}
	if trigger.NeedsChangedFiles(lf) && ev.ChangedFiles == nil {
		ev.ChangedFiles = pushedFiles(payload)
	}
	tr.ChangedFiles = ev.ChangedFiles[:min(len(ev.ChangedFiles), maxTracedFiles)]
	sha := ""
	if lockfetch.IsSHA(lref.Ref) {
		sha = lref.Ref
	}
	ref := tr.Ref
	if ev.Type == trigger.KindPullRequest {
		ref = "refs/heads/" + ev.SourceBranch
	}
	defaultBranch := jsonStr(payload, "repository", "default_branch")
	if ev.Type == trigger.KindPush && defaultBranch != "" && tr.Ref == "refs/heads/"+defaultBranch && sha != "" {
		if err := p.register(ctx, tr, src, repo, repoURL, tr.Ref, sha, lf); err != nil {
			return tr, err
		}
	}
	withForgeCommitMessage(ev, payload)
	if (ev.Type == trigger.KindPush || ev.Type == trigger.KindPullRequest) && sha != "" && strings.Trim(sha, "0") != "" {
		// The gates read the commit through git, like the lock (gates.go).
		gg := &gitGates{ctx: ctx, url: repoURL, sha: sha, auth: auth}
		defer gg.close()
		ev.Files = gg
		if ev.CommitMessage == "" {
			ev.LoadCommitMessage = gg.message
		}
	}
	rc := RunContext{DeliveryID: d.ID, Source: src, RepoIdentifier: repo, RepoURL: repoURL, Ref: ref, SHA: sha, TriggeredBy: ev.SenderUsername,
		LockFileSource: lockSource}
	return tr, p.createForgeRuns(ctx, d, tr, src, ev, lf, rc, commit, notes, b)
}

// pushedFiles collects the added, modified and removed files of a push
// payload's commits (Gitea, Forgejo, Gogs and GitHub-style payloads carry
// them); [] when there are none, so path-filtered triggers do not fire.
func pushedFiles(payload map[string]any) []string {
	seen := map[string]bool{}
	out := []string{}
	commits, _ := payload["commits"].([]any)
	for _, c := range commits {
		cm, _ := c.(map[string]any)
		for _, k := range []string{"added", "modified", "removed"} {
			list, _ := cm[k].([]any)
			for _, f := range list {
				if s, ok := f.(string); ok && !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}
