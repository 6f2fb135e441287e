// Package github normalizes GitHub webhook deliveries into trigger events
// (KiCI's GitHub normalizer; see docs/kici-compatibility.md#matching)
// and says at which revision each
// event's lock file is read.
package github

import (
	"strings"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/trigger"
)

// ProviderName is Event.Provider for events normalized here.
const ProviderName = "github"

// LockRef is where an event's lock file is read (see provider.LockRef).
type LockRef = provider.LockRef

// ZeroSHA is the all-zero commit id GitHub sends as push `before` on branch
// creation and as `after` on deletion.
const ZeroSHA = "0000000000000000000000000000000000000000"

// IsZeroSHA reports whether sha is GitHub's all-zero commit id (branch or
// tag created or deleted): such pushes have no changed files.
func IsZeroSHA(sha string) bool { return sha == ZeroSHA }

// SupportedEvents lists the X-GitHub-Event names Normalize turns into
// trigger events, in KiCI's normalizer order.
var SupportedEvents = []string{
	"push", "pull_request", "issue_comment", "pull_request_review",
	"pull_request_review_comment", "repository_dispatch", "release", "create",
	"delete", "status", "workflow_run", "fork", "star", "watch",
}

// Normalize turns one GitHub delivery (eventName = X-GitHub-Event, payload
// = the raw body) into a trigger event and its lock ref:
//
//   - push: refs/tags/X ⇒ type "tag", TargetBranch X, no action;
//     refs/heads/X ⇒ "push", X; any other ref ⇒ "push", ref verbatim.
//     Lock ref = after.
//   - pull_request ⇒ "pull_request": TargetBranch = BaseBranch = base ref
//     (a payload without one is unsupported), SourceBranch = head ref,
//     IsForkPR = head repository differs from the base repository (or is
//     gone). Lock ref = head SHA, BaseRef = base ref.
//   - pull_request_review / pull_request_review_comment ⇒ "review" /
//     "review_comment" with the same PR fields and lock ref.
//   - issue_comment ⇒ "comment", TargetBranch = repository default branch
//     (fallback "main").
//   - repository_dispatch ⇒ "dispatch", Action = payload action,
//     TargetBranch = payload branch (fallback default branch).
//   - release (target_commitish; lock ref too), create / delete (ref),
//     status (first branch; lock ref = sha), workflow_run (head branch),
//     fork / star / watch (default branch) keep their names.
//
// Every event carries Provider "github", SourceRepo = repository.full_name,
// Action = payload action, SenderUsername / SenderUserID = sender, and the
// decoded body as Payload; ChangedFiles is left nil (the caller fetches them
// when trigger.NeedsChangedFiles says so). Any other event name returns an
// error matching provider.ErrUnsupportedEvent; a body that is not a JSON
// object returns one matching provider.ErrInvalidPayload. Normalize never
// panics, whatever the body.
func Normalize(eventName string, payload []byte) (*trigger.Event, LockRef, error) {
	return normalize(ProviderName, eventName, payload)
}

// NormalizeAs is Normalize with another Provider name on the event (the
// universal-git github-repo preset uses "github-repo").
func NormalizeAs(providerName, eventName string, payload []byte) (*trigger.Event, LockRef, error) {
	return normalize(providerName, eventName, payload)
}

// EventBase is the part of an event that GitHub-shaped payloads (GitHub's
// and the Gitea family's) carry the same way: type, action, payload,
// provider, source repository and sender id. The sender's login is left to
// the caller: the Gitea family names it in more than one field.
func EventBase(prov, eventName string, p map[string]any) *trigger.Event {
	return &trigger.Event{
		Type:         trigger.Kind(eventName),
		Action:       provider.Str(p, "action"),
		Payload:      p,
		Provider:     provider.Name(prov),
		SourceRepo:   provider.Str(p, "repository", "full_name"),
		SenderUserID: provider.Int(p, "sender", "id"),
	}
}

func normalize(prov, eventName string, payload []byte) (*trigger.Event, LockRef, error) {
	head := LockRef{Ref: provider.HEAD}
	if !supported(eventName) {
		return nil, head, provider.Unsupported(prov, eventName, "kici starts no workflow from this event")
	}
	p, err := provider.DecodeObject(payload)
	if err != nil {
		return nil, head, err
	}
	ev := EventBase(prov, eventName, p)
	ev.SenderUsername = provider.Str(p, "sender", "login")
	defaultBranch := provider.DefaultBranch(p, "repository", "default_branch")
	ref := head
	switch eventName {
	case "push":
		ev.Type, ev.TargetBranch = RefKind(provider.Str(p, "ref"))
		if ev.Type == "tag" {
			ev.Action = ""
		}
		if ev.TargetBranch == "" {
			return nil, head, provider.Unsupported(prov, eventName, "push without a ref")
		}
		if after := provider.Str(p, "after"); after != "" {
			ref.Ref = after
		}
	case "pull_request", "pull_request_review", "pull_request_review_comment":
		pr := provider.Obj(p, "pull_request")
		base := provider.Str(pr, "base", "ref")
		if base == "" {
			return nil, head, provider.Unsupported(prov, eventName, "pull request without a base ref")
		}
		switch eventName {
		case "pull_request_review":
			ev.Type = "review"
		case "pull_request_review_comment":
			ev.Type = "review_comment"
		}
		ev.TargetBranch = base
		ev.BaseBranch = base
		ev.SourceBranch = provider.Str(pr, "head", "ref")
		ev.IsForkPR = IsFork(pr)
		if sha := provider.Str(pr, "head", "sha"); sha != "" {
			ref.Ref = sha
		}
		ref.BaseRef = base
	case "issue_comment":
		ev.Type = "comment"
		ev.TargetBranch = defaultBranch
	case "repository_dispatch":
		ev.Type = "dispatch"
		ev.TargetBranch = provider.Str(p, "branch")
		if ev.TargetBranch == "" {
			ev.TargetBranch = defaultBranch
		}
	case "release":
		ev.TargetBranch = provider.Str(p, "release", "target_commitish")
		if ev.TargetBranch == "" {
			ev.TargetBranch = defaultBranch
		} else {
			ref.Ref = ev.TargetBranch
		}
	case "create", "delete":
		ev.TargetBranch = provider.Str(p, "ref")
	case "status":
		if bs, ok := p["branches"].([]any); ok && len(bs) > 0 {
			b, _ := bs[0].(map[string]any)
			ev.TargetBranch = provider.Str(b, "name")
		}
		if sha := provider.Str(p, "sha"); sha != "" {
			ref.Ref = sha
		}
	case "workflow_run":
		ev.TargetBranch = provider.Str(p, "workflow_run", "head_branch")
	case "fork", "star", "watch":
		ev.TargetBranch = defaultBranch
	}
	return ev, ref, nil
}

func supported(eventName string) bool {
	for _, e := range SupportedEvents {
		if e == eventName {
			return true
		}
	}
	return false
}

// RefKind classifies a full git ref: "refs/tags/X" ⇒ ("tag", X),
// "refs/heads/X" ⇒ ("push", X), anything else ⇒ ("push", ref verbatim).
func RefKind(ref string) (eventType trigger.Kind, name string) {
	if t, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return trigger.KindTag, t
	}
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return trigger.KindPush, b
	}
	return trigger.KindPush, ref
}

// IsFork reports whether a pull request object comes from a fork: its head
// repository differs from its base repository (compared by id when both
// carry one, else by full_name), or the head repository is gone (null,
// the fork was deleted).
func IsFork(pr map[string]any) bool {
	headRepo := provider.Obj(pr, "head", "repo")
	baseRepo := provider.Obj(pr, "base", "repo")
	if headRepo == nil {
		return true
	}
	hid, bid := provider.Int(headRepo, "id"), provider.Int(baseRepo, "id")
	if hid != 0 && bid != 0 {
		return hid != bid
	}
	return provider.Str(headRepo, "full_name") != provider.Str(baseRepo, "full_name")
}
