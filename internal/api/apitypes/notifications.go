package apitypes

import "time"

// NotificationCreate is the body of POST /notifications.
type NotificationCreate struct {
	// OrgID is the org whose runs are selected (required).
	OrgID string `json:"orgId"`
	// SourceID and WorkflowName narrow the selection ("" = all).
	SourceID     string `json:"sourceId,omitempty"`
	WorkflowName string `json:"workflowName,omitempty"`
	// Outcomes are failed, fixed, succeeded, held (empty = all four).
	Outcomes []string `json:"outcomes,omitempty"`
	// Channel is webhook, slack or email.
	Channel string `json:"channel"`
	// Target is the webhook or Slack URL, or comma-separated addresses.
	Target string `json:"target"`
	// Secret signs a webhook's requests (at least 16 characters); empty
	// for a webhook = one is generated and answered once.
	Secret string `json:"secret,omitempty"`
}

// NotificationView is a subscription as listings show it: the target
// redacted to scheme and host for URLs, never the secret.
type NotificationView struct {
	ID           string    `json:"id"`
	OrgID        string    `json:"orgId"`
	SourceID     string    `json:"sourceId,omitempty"`
	WorkflowName string    `json:"workflowName,omitempty"`
	Outcomes     []string  `json:"outcomes"`
	Channel      string    `json:"channel"`
	Target       string    `json:"target"`
	Enabled      bool      `json:"enabled"`
	CreatedAt    time.Time `json:"createdAt"`
}

// NotificationCreated answers POST /notifications (201): the view, and
// the webhook secret when kici generated it (shown only here).
type NotificationCreated struct {
	NotificationView
	Secret string `json:"secret,omitempty"`
}

// NotificationList is the body of GET /notifications.
type NotificationList struct {
	Notifications []NotificationView `json:"notifications"`
}

// NotificationTestQueued answers POST /notifications/{id}/test (202): the
// outbox row of the test message.
type NotificationTestQueued struct {
	DeliveryID string `json:"deliveryId"`
}

// NotificationDeliveryView is one outbox row: a message about a run's
// outcome and the state of its delivery (pending, delivered, failed).
type NotificationDeliveryView struct {
	ID             string                     `json:"id"`
	SubscriptionID string                     `json:"subscriptionId"`
	RunID          string                     `json:"runId"`
	Outcome        string                     `json:"outcome"`
	Channel        string                     `json:"channel"`
	Status         NotificationDeliveryStatus `json:"status"`
	Attempts       int                        `json:"attempts"`
	NextAttemptAt  *time.Time                 `json:"nextAttemptAt,omitempty"`
	LastError      string                     `json:"lastError,omitempty"`
	LastStatusCode int                        `json:"lastStatusCode,omitempty"`
	DeliveredAt    *time.Time                 `json:"deliveredAt,omitempty"`
	CreatedAt      time.Time                  `json:"createdAt"`
	UpdatedAt      time.Time                  `json:"updatedAt"`
}

// NotificationDeliveryList is the body of GET /notification-deliveries.
type NotificationDeliveryList struct {
	Deliveries []NotificationDeliveryView `json:"deliveries"`
}
