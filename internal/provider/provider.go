// Package provider holds what every forge adapter shares: where an event's
// lock file is read (LockRef) and the typed results of normalization
// (ErrUnsupportedEvent, ErrInvalidPayload). The adapters live in the
// sub-packages github, universal (Gitea, Forgejo, Gogs, GitLab, GitHub and
// custom payloads through a universal-git source) and local.
package provider

import (
	"encoding/json"
	"errors"
	"fmt"
)

// HEAD is the LockRef.Ref of events that are not tied to a commit: the lock
// is read on the repository's default branch (KiCI normalizer: "else HEAD").
const HEAD = "HEAD"

// LockRef says at which revision the lock file for an event must be read
// (see docs/kici-compatibility.md#matching).
type LockRef struct {
	// Ref is a commit SHA (push → after, pull request / review / review
	// comment → head SHA, status → sha), a release's target_commitish (branch
	// name or SHA), or HEAD for every other event.
	Ref string `json:"ref"`
	// BaseRef is set for pull-request-scoped events only: the base branch
	// name, whose lock applies when the PR author has no write access (KiCI
	// security/lock-source.ts). "" otherwise.
	BaseRef string `json:"baseRef,omitempty"`
}

// ErrUnsupportedEvent is the errors.Is target of UnsupportedEventError: the
// event is valid but kici does not start workflows from it. Callers record
// the delivery as ignored; it is not a failure.
var ErrUnsupportedEvent = errors.New("unsupported event")

// ErrInvalidPayload is the errors.Is target for a body that cannot be
// normalized at all (not a JSON object, or over the nesting limit).
var ErrInvalidPayload = errors.New("invalid payload")

// UnsupportedEventError reports an event a normalizer does not turn into a
// trigger event, and why.
type UnsupportedEventError struct {
	// Provider is the adapter name (github, gitea, gitlab-repo, …).
	Provider string
	// Event is the inbound event name (X-GitHub-Event, X-Gitea-Event, …).
	Event string
	// Reason says why (unknown event, missing base ref, …).
	Reason string
}

// Error implements error.
func (e *UnsupportedEventError) Error() string {
	return fmt.Sprintf("%s: unsupported event %q: %s", e.Provider, e.Event, e.Reason)
}

// Is makes errors.Is(err, ErrUnsupportedEvent) true.
func (e *UnsupportedEventError) Is(target error) bool { return target == ErrUnsupportedEvent }

// Unsupported builds an *UnsupportedEventError.
func Unsupported(providerName, event, reason string) error {
	return &UnsupportedEventError{Provider: providerName, Event: event, Reason: reason}
}

// DecodeObject decodes a webhook body that must be a JSON object. Errors
// wrap ErrInvalidPayload.
func DecodeObject(body []byte) (map[string]any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrInvalidPayload)
	}
	return m, nil
}

// Str walks nested objects of m along path and returns the string found
// there; "" when a step is missing or the value is not a string. Hostile
// payloads with unexpected types therefore read as absent fields.
func Str(m map[string]any, path ...string) string {
	s, _ := Value(m, path...).(string)
	return s
}

// DefaultBranch returns the repository's default branch named at path, or
// "main" when the payload does not name one.
func DefaultBranch(m map[string]any, path ...string) string {
	if b := Str(m, path...); b != "" {
		return b
	}
	return "main"
}

// Obj returns the object at path, or nil.
func Obj(m map[string]any, path ...string) map[string]any {
	o, _ := Value(m, path...).(map[string]any)
	return o
}

// Int returns the integral number at path (JSON numbers decode as float64;
// values beyond ±2^53 or with a fraction read as 0).
func Int(m map[string]any, path ...string) int64 {
	f, ok := Value(m, path...).(float64)
	if !ok || f != float64(int64(f)) || f > 1<<53 || f < -(1<<53) {
		return 0
	}
	return int64(f)
}

// Value walks nested objects; nil when a step is missing.
func Value(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[k]
	}
	return cur
}
