// Package trigger matches normalized forge events against lock-file
// workflow triggers and explains each decision with a trace, with the
// semantics of KiCI's matcher (see docs/kici-compatibility.md#matching).
package trigger

import (
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/provider"
)

// Kind is the normalized event type (push, pull_request, schedule, …);
// apitypes', as a run's triggerType is served.
type Kind = apitypes.TriggerKind

// Event kinds, apitypes' constants under the matcher's names.
const (
	KindPush             = apitypes.TriggerPush
	KindTag              = apitypes.TriggerTag
	KindPullRequest      = apitypes.TriggerPullRequest
	KindComment          = apitypes.TriggerComment
	KindReview           = apitypes.TriggerReview
	KindReviewComment    = apitypes.TriggerReviewComment
	KindRelease          = apitypes.TriggerRelease
	KindDispatch         = apitypes.TriggerDispatch
	KindCreate           = apitypes.TriggerCreate
	KindDelete           = apitypes.TriggerDelete
	KindStatus           = apitypes.TriggerStatus
	KindWorkflowRun      = apitypes.TriggerWorkflowRun
	KindFork             = apitypes.TriggerFork
	KindStar             = apitypes.TriggerStar
	KindWatch            = apitypes.TriggerWatch
	KindSchedule         = apitypes.TriggerSchedule
	KindWorkflowComplete = apitypes.TriggerWorkflowComplete
	KindJobComplete      = apitypes.TriggerJobComplete
	KindLifecycle        = apitypes.TriggerLifecycle
	KindKiciEvent        = apitypes.TriggerKiciEvent
	KindGenericWebhook   = apitypes.TriggerGenericWebhook
	KindManual           = apitypes.TriggerManual
	KindRerun            = apitypes.TriggerRerun
)

// Event is a normalized forge or internal event (KiCI SimulatedEvent).
type Event struct {
	// Type is the normalized event type: push, tag, pull_request, comment,
	// review, review_comment, release, dispatch, create, delete, status,
	// workflow_run, fork, star, watch, schedule, workflow_complete,
	// job_complete, lifecycle, kici_event, generic_webhook, or a raw event
	// name for webhook triggers.
	Type Kind `json:"type"`
	// Action is the event's action (e.g. "opened"); "" when the event has
	// none.
	Action string `json:"action,omitempty"`
	// Payload is the raw (decoded JSON) event body.
	Payload map[string]any `json:"payload,omitempty"`
	// TargetBranch is the pushed branch (without refs/heads/), the tag name
	// for tag events, or the PR base branch.
	TargetBranch string `json:"targetBranch"`
	// SourceBranch is the PR head branch; "" when unknown.
	SourceBranch string `json:"sourceBranch,omitempty"`
	// ChangedFiles are repo-relative paths changed by the event. Empty means
	// none known, which makes path-filtered triggers fail (KiCI).
	ChangedFiles []string `json:"changedFiles,omitempty"`
	// Provider names the forge adapter (github, gitea, local, generic, …).
	Provider provider.Name `json:"provider,omitempty"`
	// SourceRepo is the event's repository as "owner/repo"; "" when unknown.
	SourceRepo string `json:"sourceRepo,omitempty"`
	// IsForkPR reports a pull request whose head repository differs from the
	// base repository.
	IsForkPR bool `json:"isForkPR,omitempty"`
	// SenderUsername is the login of the user who caused the event.
	SenderUsername string `json:"senderUsername,omitempty"`
	// SenderUserID is the forge's numeric id of that user; 0 when unknown.
	SenderUserID int64 `json:"senderUserId,omitempty"`
	// CommitMessage is the full message of the event's head commit, for
	// the commitMessage and `[skip ci]` gates; "" when unknown.
	CommitMessage string `json:"commitMessage,omitempty"`
	// LoadCommitMessage, when set and CommitMessage is empty, reads the
	// head commit's message the first time a gate needs it (a pull
	// request's payload carries none: the forge API or a git fetch does);
	// nil when the caller cannot. An error leaves the message empty and is
	// shown in the gate's trace.
	LoadCommitMessage func() (string, error) `json:"-"`
	// Files reads files at the event's commit for the `requires` gate; nil
	// when the caller cannot (the gate then fails).
	Files FileReader `json:"-"`
	// BaseBranch is a pull request's base branch (the same as TargetBranch
	// for pull_request, review and review_comment events); "" otherwise.
	BaseBranch string `json:"baseBranch,omitempty"`
}

// Check is one entry of a decision trace.
type Check = apitypes.Check

// Decision is the outcome of matching one workflow against one event; the
// admin API serves it as it is (GET /event-log/{deliveryId} trace).
type Decision = apitypes.Decision
