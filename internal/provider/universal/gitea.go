package universal

import (
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

// giteaActions maps Gitea/Forgejo/Gogs pull request actions to GitHub's.
var giteaActions = map[string]string{
	"synchronized":  "synchronize",
	"label_updated": "labeled",
	"label_cleared": "unlabeled",
}

// giteaReviewStates maps Gitea review event names to GitHub review states.
var giteaReviewStates = map[string]string{
	"pull_request_review_approved": "approved",
	"pull_request_review_rejected": "changes_requested",
	"pull_request_review_comment":  "commented",
}

// normalizeGitea handles the Gitea family (Gitea, Forgejo, Gogs), whose
// payloads follow GitHub's for push/create/delete/fork/release/pull_request
// with these differences: create/delete refs are short names; pull request
// sync is "synchronized" (also sent as event pull_request_sync); comments on
// PRs come as issue_comment (with is_pull) or pull_request_comment; reviews
// arrive as pull_request_review_{approved,rejected,comment}; users carry
// "login" (Gogs also "username").
func normalizeGitea(preset, eventName string, body []byte) (*trigger.Event, provider.LockRef, error) {
	head := provider.LockRef{Ref: provider.HEAD}
	p, err := provider.DecodeObject(body)
	if err != nil {
		return nil, head, err
	}
	ev := github.EventBase(preset, eventName, p)
	ev.SenderUsername = userLogin(provider.Obj(p, "sender"))
	if ev.SenderUsername == "" {
		ev.SenderUsername = userLogin(provider.Obj(p, "pusher"))
	}
	defaultBranch := provider.DefaultBranch(p, "repository", "default_branch")
	ref := head
	switch eventName {
	case "push":
		ev.Type, ev.TargetBranch = github.RefKind(provider.Str(p, "ref"))
		if ev.TargetBranch == "" {
			return nil, head, provider.Unsupported(preset, eventName, "push without a ref")
		}
		ev.Action = ""
		if after := provider.Str(p, "after"); after != "" {
			ref.Ref = after
		}
	case "pull_request", "pull_request_sync", "pull_request_review_approved", "pull_request_review_rejected", "pull_request_review_comment":
		pr := provider.Obj(p, "pull_request")
		base := provider.Str(pr, "base", "ref")
		if base == "" {
			return nil, head, provider.Unsupported(preset, eventName, "pull request without a base ref")
		}
		ev.Type = "pull_request"
		if a, ok := giteaActions[ev.Action]; ok {
			ev.Action = a
		}
		if eventName == "pull_request_sync" {
			ev.Action = "synchronize"
		}
		if state, ok := giteaReviewStates[eventName]; ok {
			ev.Type = "review"
			ev.Action = "submitted"
			review := clone(provider.Obj(p, "review"))
			review["state"] = state
			p["review"] = review
		}
		ev.TargetBranch, ev.BaseBranch = base, base
		ev.SourceBranch = provider.Str(pr, "head", "ref")
		ev.IsForkPR = github.IsFork(pr)
		if sha := provider.Str(pr, "head", "sha"); sha != "" {
			ref.Ref = sha
		}
		ref.BaseRef = base
	case "issue_comment", "pull_request_comment":
		ev.Type = "comment"
		ev.TargetBranch = defaultBranch
		issue := clone(provider.Obj(p, "issue"))
		isPull, _ := p["is_pull"].(bool)
		if eventName == "pull_request_comment" || isPull {
			if _, ok := issue["pull_request"].(map[string]any); !ok {
				issue["pull_request"] = map[string]any{}
			}
		} else {
			// Gitea serializes "pull_request": null on plain issues; the
			// matcher treats the key's presence as "on a PR".
			delete(issue, "pull_request")
		}
		p["issue"] = issue
	case "release":
		ev.TargetBranch = provider.Str(p, "release", "target_commitish")
		if ev.TargetBranch == "" {
			ev.TargetBranch = defaultBranch
		} else {
			ref.Ref = ev.TargetBranch
		}
	case "create", "delete":
		r := provider.Str(p, "ref")
		_, short := github.RefKind(r)
		ev.TargetBranch = short
		p["ref"] = short
	case "fork":
		ev.TargetBranch = defaultBranch
	default:
		return nil, head, provider.Unsupported(preset, eventName, "kici starts no workflow from this event")
	}
	return ev, ref, nil
}

func userLogin(u map[string]any) string {
	if s := provider.Str(u, "login"); s != "" {
		return s
	}
	if s := provider.Str(u, "username"); s != "" {
		return s
	}
	return provider.Str(u, "name")
}

// clone copies an object (nil ⇒ empty) so canonical fields can be set
// without aliasing the decoded body.
func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
