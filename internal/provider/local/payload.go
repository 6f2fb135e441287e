package local

import (
	"encoding/json"
	"fmt"
	"strings"

	"kici.dev/kici/internal/trigger"
)

// PushPayload is the body of a local-source push delivery (what
// `kici-admin source trigger-local` posts with X-Event-Type: push):
//
//	{"ref":"refs/heads/main","before":"<sha or zeros>","after":"<sha>",
//	 "repository":{"full_name":"<org>/<name>","path":"<abs path>"},
//	 "sender":{"login":"<user>"}}
type PushPayload struct {
	Ref        string         `json:"ref"`
	Before     string         `json:"before"`
	After      string         `json:"after"`
	Repository PushRepository `json:"repository"`
	Sender     PushSender     `json:"sender"`
}

// PushRepository identifies the pushed repository.
type PushRepository struct {
	// FullName is "<org>/<source name>".
	FullName string `json:"full_name"`
	// Path is the repository's absolute path on the orchestrator host.
	Path string `json:"path"`
}

// PushSender names who pushed.
type PushSender struct {
	Login string `json:"login"`
}

// ParsePushPayload decodes and checks a push payload: ref is required and
// must start with "refs/"; after (when not zero) and before (when not empty
// or zero) must be 40-hex commit ids. Commit ids are lower-cased.
func ParsePushPayload(data []byte) (*PushPayload, error) {
	var p PushPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("local: push payload: %w", err)
	}
	if !strings.HasPrefix(p.Ref, "refs/") || strings.HasPrefix(p.Ref, "-") {
		return nil, fmt.Errorf("local: push payload: ref %q is not a full ref (refs/…)", p.Ref)
	}
	if p.After == "" {
		return nil, fmt.Errorf("local: push payload: missing after")
	}
	if !IsSHA(p.After) {
		return nil, fmt.Errorf("local: push payload: after: %w: %q", ErrInvalidSHA, p.After)
	}
	if p.Before != "" && !IsSHA(p.Before) {
		return nil, fmt.Errorf("local: push payload: before: %w: %q", ErrInvalidSHA, p.Before)
	}
	p.After = strings.ToLower(p.After)
	p.Before = strings.ToLower(p.Before)
	return &p, nil
}

// RefKind classifies a full ref: branch ("refs/heads/X" ⇒ "push", X), tag
// ("refs/tags/X" ⇒ "tag", X), anything else ⇒ "push" with the ref verbatim
// (KiCI GitHub normalizer rules).
func RefKind(ref string) (eventType trigger.Kind, name string) {
	if t, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return trigger.KindTag, t
	}
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return trigger.KindPush, b
	}
	return trigger.KindPush, ref
}

// Deleted reports whether the push deleted its ref (after is zero).
func (p *PushPayload) Deleted() bool { return p.After == ZeroSHA }
