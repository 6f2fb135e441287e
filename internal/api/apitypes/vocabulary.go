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
