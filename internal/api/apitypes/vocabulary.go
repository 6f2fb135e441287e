package apitypes

// The store's words the served shapes carry. They are named here, in the
// leaf the clients link, so a served field and the store's row have one
// type; the store declares them again as aliases under its own names.

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
