// Package universal normalizes deliveries of universal-git sources: generic
// sources with a git configuration whose payloads come from a known forge
// preset (forgejo, gitea, gogs, gitlab-repo, github-repo) or from a custom
// JSONPath mapping (KiCI's universal-git presets; see
// docs/kici-compatibility.md#ingress).
//
// Every preset yields the same trigger.Event shape as the GitHub
// normalizer, so the same triggers match whichever forge sent the event:
// type push/tag/pull_request/comment/review/release/create/delete/fork,
// TargetBranch, SourceBranch, SourceRepo "owner/repo", Action in GitHub's
// vocabulary (Gitea's "synchronized" becomes "synchronize", GitLab's "open"
// becomes "opened", …). Where the matcher reads payload fields
// (comment.body, issue.pull_request, review.state) the payload gets them
// in GitHub's shape.
package universal

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

// Preset names.
const (
	PresetForgejo    = "forgejo"
	PresetGitea      = "gitea"
	PresetGogs       = "gogs"
	PresetGitLabRepo = "gitlab-repo"
	PresetGitHubRepo = "github-repo"
	PresetCustom     = "custom"
)

// Presets lists the universal-git presets in KiCI's order.
func Presets() []string {
	return []string{PresetForgejo, PresetGitea, PresetGogs, PresetGitLabRepo, PresetGitHubRepo, PresetCustom}
}

// EventHeader is the request header carrying the event name for a preset:
// X-Forgejo-Event (Forgejo also sends X-Gitea-Event), X-Gitea-Event,
// X-Gogs-Event, X-Gitlab-Event, X-GitHub-Event; "" for custom (the source's
// own eventTypeHeader / eventTypePath decide).
func EventHeader(preset string) string {
	switch preset {
	case PresetForgejo:
		return "X-Forgejo-Event"
	case PresetGitea:
		return "X-Gitea-Event"
	case PresetGogs:
		return "X-Gogs-Event"
	case PresetGitLabRepo:
		return "X-Gitlab-Event"
	case PresetGitHubRepo:
		return "X-GitHub-Event"
	}
	return ""
}

// Custom mapping keys (Config.PayloadPaths).
const (
	PathRef          = "ref"
	PathSHA          = "sha"
	PathBefore       = "before"
	PathRepo         = "repo"
	PathBranch       = "branch"
	PathTargetBranch = "targetBranch"
	PathSourceBranch = "sourceBranch"
	PathAction       = "action"
	PathSender       = "sender"
)

var customPathKeys = []string{PathRef, PathSHA, PathBefore, PathRepo, PathBranch, PathTargetBranch, PathSourceBranch, PathAction, PathSender}

// normalizedTypes are the event types an eventMapping may produce.
var normalizedTypes = []string{"push", "tag", "pull_request", "comment", "review", "review_comment", "release", "dispatch", "create", "delete", "status", "workflow_run", "fork", "star", "watch"}

// Config is a universal-git source's normalization configuration.
type Config struct {
	// Preset is one of Presets().
	Preset string `json:"preset"`
	// PayloadPaths maps a field (ref, sha, before, repo, branch,
	// targetBranch, sourceBranch, action, sender) to the JSONPath reading it
	// from the body; custom preset only. ref (a full git ref) or
	// branch/targetBranch is required.
	PayloadPaths map[string]string `json:"payloadPaths,omitempty"`
	// EventMapping maps an inbound event name to a normalized type (push,
	// tag, pull_request, …); custom preset only, at least one entry. For a
	// "push" mapping a ref under refs/tags/ yields a "tag" event.
	EventMapping map[string]string `json:"eventMapping,omitempty"`
}

// Validate checks the preset and, for custom, the mapping: known keys,
// valid JSONPaths, known target types.
func (c Config) Validate() error {
	if !slices.Contains(Presets(), c.Preset) {
		return fmt.Errorf("universal-git: unknown preset %q (want one of %s)", c.Preset, strings.Join(Presets(), ", "))
	}
	if c.Preset != PresetCustom {
		if len(c.PayloadPaths) > 0 || len(c.EventMapping) > 0 {
			return fmt.Errorf("universal-git: payloadPaths and eventMapping are only for the custom preset")
		}
		return nil
	}
	if len(c.EventMapping) == 0 {
		return fmt.Errorf("universal-git: the custom preset needs eventMapping")
	}
	if len(c.PayloadPaths) == 0 {
		return fmt.Errorf("universal-git: the custom preset needs payloadPaths")
	}
	var errs []string
	for k, p := range c.PayloadPaths {
		if !slices.Contains(customPathKeys, k) {
			errs = append(errs, fmt.Sprintf("payloadPaths: unknown key %q (want %s)", k, strings.Join(customPathKeys, ", ")))
			continue
		}
		if _, err := trigger.CompileJSONPath(p); err != nil {
			errs = append(errs, fmt.Sprintf("payloadPaths.%s: %v", k, err))
		}
	}
	if c.PayloadPaths[PathRef] == "" && c.PayloadPaths[PathBranch] == "" && c.PayloadPaths[PathTargetBranch] == "" {
		errs = append(errs, "payloadPaths needs ref, branch or targetBranch")
	}
	for ev, typ := range c.EventMapping {
		if ev == "" || !slices.Contains(normalizedTypes, typ) {
			errs = append(errs, fmt.Sprintf("eventMapping: %q → %q: want a non-empty event name mapped to one of %s", ev, typ, strings.Join(normalizedTypes, ", ")))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return errors.New("universal-git: " + strings.Join(errs, "; "))
	}
	return nil
}

// Normalize turns one delivery of a universal-git source into a trigger
// event and its lock ref. eventName is the value of the preset's
// EventHeader (for custom: the source's event name). Unknown events return
// an error matching provider.ErrUnsupportedEvent; a body that is not a JSON
// object one matching provider.ErrInvalidPayload; an invalid cfg an error
// matching neither. Normalize never panics.
func Normalize(cfg Config, eventName string, payload []byte) (*trigger.Event, provider.LockRef, error) {
	head := provider.LockRef{Ref: provider.HEAD}
	if err := cfg.Validate(); err != nil {
		return nil, head, err
	}
	switch cfg.Preset {
	case PresetGitHubRepo:
		return github.NormalizeAs(PresetGitHubRepo, eventName, payload)
	case PresetForgejo, PresetGitea, PresetGogs:
		return normalizeGitea(cfg.Preset, eventName, payload)
	case PresetGitLabRepo:
		return normalizeGitLab(eventName, payload)
	}
	return normalizeCustom(cfg, eventName, payload)
}
