package universal

import (
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

// gitlabMRActions maps GitLab merge request actions to GitHub PR actions
// ("update" is "synchronize" when it carries new commits, i.e. oldrev).
var gitlabMRActions = map[string]string{
	"open":   "opened",
	"reopen": "reopened",
	"close":  "closed",
	"merge":  "closed",
	"update": "edited",
}

// gitlabReleaseActions maps GitLab release actions to GitHub's.
var gitlabReleaseActions = map[string]string{"create": "created", "update": "edited", "delete": "deleted"}

// gitlabNoteActions maps GitLab note actions to GitHub comment actions.
var gitlabNoteActions = map[string]string{"create": "created", "update": "edited"}

// normalizeGitLab handles GitLab project webhooks (X-Gitlab-Event): "Push
// Hook", "Tag Push Hook", "Merge Request Hook", "Note Hook", "Release Hook".
// SourceRepo is project.path_with_namespace; a merge request is a fork PR
// when its source and target projects differ.
func normalizeGitLab(eventName string, body []byte) (*trigger.Event, provider.LockRef, error) {
	const prov = PresetGitLabRepo
	head := provider.LockRef{Ref: provider.HEAD}
	p, err := provider.DecodeObject(body)
	if err != nil {
		return nil, head, err
	}
	ev := &trigger.Event{
		Payload:    p,
		Provider:   prov,
		SourceRepo: provider.Str(p, "project", "path_with_namespace"),
	}
	ev.SenderUsername = provider.Str(p, "user_username")
	ev.SenderUserID = provider.Int(p, "user_id")
	if ev.SenderUsername == "" {
		ev.SenderUsername = provider.Str(p, "user", "username")
		ev.SenderUserID = provider.Int(p, "user", "id")
	}
	defaultBranch := provider.DefaultBranch(p, "project", "default_branch")
	ref := head
	switch eventName {
	case "Push Hook", "Tag Push Hook":
		ev.Type, ev.TargetBranch = github.RefKind(provider.Str(p, "ref"))
		if ev.TargetBranch == "" {
			return nil, head, provider.Unsupported(prov, eventName, "push without a ref")
		}
		if after := provider.Str(p, "after"); after != "" {
			ref.Ref = after
		}
	case "Merge Request Hook":
		oa := provider.Obj(p, "object_attributes")
		target := provider.Str(oa, "target_branch")
		if target == "" {
			return nil, head, provider.Unsupported(prov, eventName, "merge request without a target branch")
		}
		ev.Type = "pull_request"
		a := provider.Str(oa, "action")
		ev.Action = a
		if m, ok := gitlabMRActions[a]; ok {
			ev.Action = m
		}
		if a == "update" && provider.Str(oa, "oldrev") != "" {
			ev.Action = "synchronize"
		}
		ev.TargetBranch, ev.BaseBranch = target, target
		ev.SourceBranch = provider.Str(oa, "source_branch")
		src, tgt := provider.Int(oa, "source_project_id"), provider.Int(oa, "target_project_id")
		ev.IsForkPR = src == 0 || src != tgt
		if sha := provider.Str(oa, "last_commit", "id"); sha != "" {
			ref.Ref = sha
		}
		ref.BaseRef = target
	case "Note Hook":
		oa := provider.Obj(p, "object_attributes")
		ev.Type = "comment"
		ev.Action = "created"
		if m, ok := gitlabNoteActions[provider.Str(oa, "action")]; ok {
			ev.Action = m
		}
		ev.TargetBranch = defaultBranch
		issue := clone(provider.Obj(p, "issue"))
		delete(issue, "pull_request")
		if provider.Str(oa, "noteable_type") == "MergeRequest" {
			issue["pull_request"] = clone(provider.Obj(p, "merge_request"))
		}
		p["issue"] = issue
		comment := clone(provider.Obj(p, "comment"))
		comment["body"] = provider.Str(oa, "note")
		p["comment"] = comment
	case "Release Hook":
		ev.Type = "release"
		a := provider.Str(p, "action")
		ev.Action = a
		if m, ok := gitlabReleaseActions[a]; ok {
			ev.Action = m
		}
		ev.TargetBranch = defaultBranch
		if sha := provider.Str(p, "commit", "id"); sha != "" {
			ref.Ref = sha
		}
	default:
		return nil, head, provider.Unsupported(prov, eventName, "kici starts no workflow from this event")
	}
	return ev, ref, nil
}
