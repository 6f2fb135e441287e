package store

import (
	"context"
	"encoding/json"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// NotificationSubscription is one notification subscription: the runs it
// selects (an org, optionally one source and one workflow), the outcomes it
// is told of, and where the message goes. Target and Secret carry
// credentials (a Slack incoming-webhook URL is one) and are never
// serialised in API listings.
type NotificationSubscription struct {
	ID    string `json:"id"`
	OrgID string `json:"orgId"`
	// SourceID and WorkflowName narrow the selection ("" = every source or
	// workflow of the org).
	SourceID     string `json:"sourceId,omitempty"`
	WorkflowName string `json:"workflowName,omitempty"`
	// Outcomes are the outcome words (notify.Outcome) the subscription is
	// told of.
	Outcomes []string `json:"outcomes"`
	// Channel is the delivery channel word (notify.Channel: webhook,
	// slack, email).
	Channel string `json:"channel"`
	// Target is the webhook URL, the Slack incoming-webhook URL, or the
	// comma-separated recipient addresses of an email subscription.
	Target string `json:"-"`
	// Secret is the webhook signing key ("" for other channels).
	Secret    string    `json:"-"`
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"createdAt"`
}

// NotificationDelivery is one outbox row: a message for one subscription
// about one run's outcome, and the state of its delivery. (SubscriptionID,
// RunID, Outcome) is unique, so an outcome observed twice (by two nodes,
// or again after a restart) is sent once. The row holds the message's
// payload, which is never served: this is why it is not
// apitypes.NotificationDeliveryView, which package api copies it into
// without the payload.
type NotificationDelivery struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscriptionId"`
	OrgID          string `json:"orgId"`
	RunID          string `json:"runId"`
	Outcome        string `json:"outcome"`
	Channel        string `json:"channel"`
	// Payload is the message's JSON document (the webhook body; the Slack
	// and email renderings are made from it).
	Payload json.RawMessage `json:"-"`
	// Status is the delivery word (pending, delivered, failed).
	Status         apitypes.NotificationDeliveryStatus `json:"status"`
	Attempts       int                                 `json:"attempts"`
	NextAttemptAt  *time.Time                          `json:"nextAttemptAt,omitempty"`
	LastError      string                              `json:"lastError,omitempty"`
	LastStatusCode int                                 `json:"lastStatusCode,omitempty"`
	DeliveredAt    *time.Time                          `json:"deliveredAt,omitempty"`
	CreatedAt      time.Time                           `json:"createdAt"`
	UpdatedAt      time.Time                           `json:"updatedAt"`
}

// NotificationDeliveryFilter selects outbox rows. Empty fields do not
// filter; Limit defaults to 200.
type NotificationDeliveryFilter struct {
	SubscriptionID string
	RunID          string
	Status         apitypes.NotificationDeliveryStatus
	Limit          int
}

// NotificationAttempt is the outcome of one delivery attempt.
type NotificationAttempt struct {
	// OK: delivered at At.
	OK bool
	At time.Time
	// On failure: the error text and HTTP or SMTP status (0 = none); with
	// GaveUp the row is failed for good, else it is retried at
	// NextAttemptAt.
	Err           string
	StatusCode    int
	GaveUp        bool
	NextAttemptAt *time.Time
}

// NotificationStore keeps notification subscriptions and their outbox.
type NotificationStore interface {
	// CreateNotificationSubscription inserts n (ID and CreatedAt set by
	// the caller).
	CreateNotificationSubscription(ctx context.Context, n *NotificationSubscription) error
	// GetNotificationSubscription returns a subscription, or ErrNotFound.
	GetNotificationSubscription(ctx context.Context, id string) (*NotificationSubscription, error)
	// ListNotificationSubscriptions returns an org's subscriptions ("" =
	// every org), oldest first.
	ListNotificationSubscriptions(ctx context.Context, orgID string) ([]*NotificationSubscription, error)
	// DeleteNotificationSubscription removes a subscription and its outbox
	// rows; ErrNotFound when it does not exist.
	DeleteNotificationSubscription(ctx context.Context, id string) error
	// EnqueueNotification inserts d as pending and reports whether it was
	// new (false: the subscription was already told of that run's
	// outcome; nothing changes).
	EnqueueNotification(ctx context.Context, d *NotificationDelivery) (bool, error)
	// ClaimNotification takes a pending row due at now for holder until
	// until, if no other holder's claim is live; false when it is taken.
	ClaimNotification(ctx context.Context, id, holder string, now, until time.Time) (bool, error)
	// RecordNotificationAttempt stores an attempt's outcome and releases
	// the claim. ErrNotFound when the row is gone.
	RecordNotificationAttempt(ctx context.Context, id string, a NotificationAttempt) error
	// ListDueNotifications returns pending rows whose retry time has come
	// and whose claim is not live at now, oldest first.
	ListDueNotifications(ctx context.Context, now time.Time, limit int) ([]*NotificationDelivery, error)
	// ListNotificationDeliveries returns rows matching f, newest first.
	ListNotificationDeliveries(ctx context.Context, f NotificationDeliveryFilter) ([]*NotificationDelivery, error)
	// ListRunsCompletedSince returns terminal runs completed after t,
	// oldest completion first (what the notifier observes).
	ListRunsCompletedSince(ctx context.Context, t time.Time, limit int) ([]*Run, error)
}
