package apitypes

// The server's words the served shapes carry. They are named here, in the
// leaf the clients link, so a served field and the server's row have one
// type; the server's packages alias them under their own names
// (store.EventLogStatus, notify.DeliveryStatus, trigger.Kind, …).

// EventLogStatus is the outcome recorded on an event-log entry
// (event_log.status); a string in JSON and the database.
type EventLogStatus string

// Event-log statuses (KiCI's event_log.status; see
// docs/kici-compatibility.md#ingress).
const (
	// EventLogReceived: persisted, not processed yet.
	EventLogReceived EventLogStatus = "received"
	// EventLogProcessed: matched (possibly no workflow).
	EventLogProcessed EventLogStatus = "processed"
	// EventLogDuplicate: a replay of an accepted delivery.
	EventLogDuplicate EventLogStatus = "duplicate"
	// EventLogLockfileMissing: no lock file at the event ref.
	EventLogLockfileMissing EventLogStatus = "lockfile_missing"
	// EventLogFailed: processing failed; ErrorMessage says why.
	EventLogFailed EventLogStatus = "failed"
	// EventLogMissed: a schedule instant that fell due while no scheduler
	// held the lease and was older than the catch-up window; it was not
	// fired, and says so instead of vanishing.
	EventLogMissed EventLogStatus = "missed"
)

// NotificationDeliveryStatus is the state of a notification outbox row
// (notification_deliveries.status); notify.DeliveryStatus on the server.
type NotificationDeliveryStatus string

// Notification delivery statuses.
const (
	// NotificationPending: not delivered yet; retried at nextAttemptAt.
	NotificationPending NotificationDeliveryStatus = "pending"
	// NotificationDelivered: the receiver accepted the message.
	NotificationDelivered NotificationDeliveryStatus = "delivered"
	// NotificationFailed: refused for good or out of attempts; not retried.
	NotificationFailed NotificationDeliveryStatus = "failed"
)

// SigningKeyStatus is the state of a provenance signing key
// (orchestrator_signing_keys.status; see
// docs/kici-compatibility.md#provenance).
type SigningKeyStatus string

// Signing key statuses. Exactly one key is active; rotation demotes the
// active key to retiring and any retiring key to retired. The trusted
// (published) set is active + retiring + retired; a revoked key is never
// published again and can never be reactivated.
const (
	// SigningKeyActive signs new bundles.
	SigningKeyActive SigningKeyStatus = "active"
	// SigningKeyRetiring was active until the last rotation; still trusted.
	SigningKeyRetiring SigningKeyStatus = "retiring"
	// SigningKeyRetired is trusted but signs nothing.
	SigningKeyRetired SigningKeyStatus = "retired"
	// SigningKeyRevoked is no longer trusted.
	SigningKeyRevoked SigningKeyStatus = "revoked"
)

// CheckRunDelivery says where the delivery of a check run's (or commit
// status's) desired state to its forge stands (GET /check-runs
// "delivery").
type CheckRunDelivery string

// Delivery words of a check run.
const (
	// CheckDelivered: the forge accepted the state kici wants it to show.
	CheckDelivered CheckRunDelivery = "delivered"
	// CheckPending: a newer state waits for its turn (coalescing).
	CheckPending CheckRunDelivery = "pending"
	// CheckRetrying: the last attempt failed with a retryable error.
	CheckRetrying CheckRunDelivery = "retrying"
	// CheckFailed: the forge refused the state (4xx); not retried.
	CheckFailed CheckRunDelivery = "failed"
)

// AgentTokenKind is the kind of an agent token (agentType in the API).
type AgentTokenKind string

// Agent token kinds.
const (
	// AgentTokenStatic is a token an operator created for any number of
	// agents.
	AgentTokenStatic AgentTokenKind = "static"
	// AgentTokenEphemeral is a token a scaler minted for one agent
	// (bound to its id).
	AgentTokenEphemeral AgentTokenKind = "ephemeral"
)

// WebSessionKind says what a web UI session stands for.
type WebSessionKind string

// Kinds of web UI session.
const (
	// WebSessionToken is a session opened with an admin token: the
	// token (by its hash) is re-checked on every request, so revoking
	// the token ends the session.
	WebSessionToken WebSessionKind = "token"
	// WebSessionPerson is a session of a person signed in through an
	// OpenID Connect provider or a forge's OAuth2: the role and scope
	// were mapped at sign-in and are kept on the row.
	WebSessionPerson WebSessionKind = "person"
)

// TriggerKind is the kind of event a run was triggered by: the normalized
// event type the trigger matcher compares (trigger.Kind on the server), or
// how an operator started the run (manual, rerun). A webhook trigger may
// carry a raw event name outside this list.
type TriggerKind string

// Trigger kinds.
const (
	// TriggerPush is a branch push.
	TriggerPush TriggerKind = "push"
	// TriggerTag is a tag push.
	TriggerTag TriggerKind = "tag"
	// TriggerPullRequest is a pull or merge request event.
	TriggerPullRequest TriggerKind = "pull_request"
	// TriggerComment is an issue or pull request comment.
	TriggerComment TriggerKind = "comment"
	// TriggerReview is a pull request review.
	TriggerReview TriggerKind = "review"
	// TriggerReviewComment is a comment on a pull request's diff.
	TriggerReviewComment TriggerKind = "review_comment"
	// TriggerRelease is a release event.
	TriggerRelease TriggerKind = "release"
	// TriggerDispatch is a repository dispatch.
	TriggerDispatch TriggerKind = "dispatch"
	// TriggerCreate is a branch or tag creation.
	TriggerCreate TriggerKind = "create"
	// TriggerDelete is a branch or tag deletion.
	TriggerDelete TriggerKind = "delete"
	// TriggerStatus is a commit status event.
	TriggerStatus TriggerKind = "status"
	// TriggerWorkflowRun is a forge workflow-run event.
	TriggerWorkflowRun TriggerKind = "workflow_run"
	// TriggerFork is a repository fork.
	TriggerFork TriggerKind = "fork"
	// TriggerStar is a repository star.
	TriggerStar TriggerKind = "star"
	// TriggerWatch is a repository watch.
	TriggerWatch TriggerKind = "watch"
	// TriggerSchedule is a cron schedule instant (an internal event).
	TriggerSchedule TriggerKind = "schedule"
	// TriggerWorkflowComplete is a finished run (an internal event).
	TriggerWorkflowComplete TriggerKind = "workflow_complete"
	// TriggerJobComplete is a finished job (an internal event).
	TriggerJobComplete TriggerKind = "job_complete"
	// TriggerLifecycle is a source lifecycle event.
	TriggerLifecycle TriggerKind = "lifecycle"
	// TriggerKiciEvent is a custom event posted to kici (an internal event).
	TriggerKiciEvent TriggerKind = "kici_event"
	// TriggerGenericWebhook is a delivery of a generic webhook source.
	TriggerGenericWebhook TriggerKind = "generic_webhook"
	// TriggerManual is a run an operator started.
	TriggerManual TriggerKind = "manual"
	// TriggerRerun is a rerun of an earlier run.
	TriggerRerun TriggerKind = "rerun"
)
