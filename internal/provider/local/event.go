package local

import (
	"encoding/json"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/trigger"
)

// PushEvent normalizes a push payload (KiCI GitHub normalizer rules, which
// the local provider follows): ref refs/heads/X ⇒ type "push" with
// TargetBranch X; refs/tags/X ⇒ type "tag" with TargetBranch X; any other
// ref ⇒ type "push" with the ref verbatim. Provider is "local", SourceRepo
// is sourceRepo ("<org>/<name>", normally repository.full_name),
// SenderUsername the sender login, ChangedFiles the given list (nil when
// changed files were not computed), Payload the payload as a JSON object.
func PushEvent(p *PushPayload, sourceRepo string, changedFiles []string) *trigger.Event {
	typ, name := RefKind(p.Ref)
	var payload map[string]any
	if b, err := json.Marshal(p); err == nil {
		_ = json.Unmarshal(b, &payload)
	}
	return &trigger.Event{
		Type:           typ,
		Payload:        payload,
		TargetBranch:   name,
		ChangedFiles:   changedFiles,
		Provider:       provider.Local,
		SourceRepo:     sourceRepo,
		SenderUsername: p.Sender.Login,
	}
}
