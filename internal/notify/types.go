// Package notify tells people and systems how runs ended: subscriptions
// per org, source or workflow and per outcome (failed, fixed, succeeded,
// held waiting for approval), delivered to a signed webhook, a
// Slack-compatible incoming webhook or by email over SMTP.
//
// Delivery is durable: an observed outcome becomes a row of the store's
// outbox (notification_deliveries) before anything is sent, one row per
// subscription, run and outcome (a unique key, so two nodes or a restart
// never send it twice). Rows are claimed by one node at a time, sent, and
// retried with exponential backoff until they are delivered, refused for
// good (a 4xx answer, a 5xx SMTP reply) or out of attempts. The package
// reads runs from the store (Store), so it needs no hook in the code that
// completes runs and resumes after a restart from the rows themselves.
package notify

import (
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/store"
)

// Outcome is what happened to a run, the word a subscription selects.
type Outcome string

// Outcomes a subscription may select (KiCI notification subscriptions).
const (
	// OutcomeFailed: the run ended failed.
	OutcomeFailed Outcome = "failed"
	// OutcomeFixed: the run succeeded and the previous finished run of the
	// same source, workflow and branch had failed.
	OutcomeFixed Outcome = "fixed"
	// OutcomeSucceeded: the run ended successfully.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeHeld: the run is held waiting for an approval.
	OutcomeHeld Outcome = "held"
	// OutcomeTest: a test message sent by `kici-admin notification test`;
	// not selectable.
	OutcomeTest Outcome = "test"
)

// AllOutcomes are the selectable outcomes, in documentation order.
var AllOutcomes = []Outcome{OutcomeFailed, OutcomeFixed, OutcomeSucceeded, OutcomeHeld}

// Channel is where a subscription's messages go.
type Channel string

// Channels.
const (
	// ChannelWebhook POSTs the JSON message to a URL, signed with
	// HMAC-SHA256 (see SignatureHeader).
	ChannelWebhook Channel = "webhook"
	// ChannelSlack POSTs {"text": …} to a Slack-compatible incoming
	// webhook (Slack, Mattermost, Rocket.Chat, Discord's /slack).
	ChannelSlack Channel = "slack"
	// ChannelEmail mails the recipients through the orchestrator's SMTP
	// relay (KICI_SMTP_*).
	ChannelEmail Channel = "email"
)

// DeliveryStatus is the state of an outbox row; the admin API serves it,
// so it is apitypes'.
type DeliveryStatus = apitypes.NotificationDeliveryStatus

// Delivery statuses (the store's status column), apitypes' constants.
const (
	// DeliveryPending: not delivered yet; retried at next_attempt_at.
	DeliveryPending = apitypes.NotificationPending
	// DeliveryDelivered: the receiver accepted the message.
	DeliveryDelivered = apitypes.NotificationDelivered
	// DeliveryFailed: refused for good or out of attempts; not retried.
	DeliveryFailed = apitypes.NotificationFailed
)

// ParseOutcomes parses a comma-separated list of outcomes ("" = every
// selectable outcome). An unknown word is an error naming the valid ones.
func ParseOutcomes(s string) ([]Outcome, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(AllOutcomes), nil
	}
	var out []Outcome
	for _, w := range strings.Split(s, ",") {
		o := Outcome(strings.TrimSpace(w))
		if !slices.Contains(AllOutcomes, o) {
			return nil, fmt.Errorf("unknown outcome %q: use failed, fixed, succeeded or held", w)
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// Validate checks a subscription before it is stored: a known channel, an
// http(s) URL for the webhook channels, valid addresses for email, a
// secret of at least 16 bytes for a signed webhook, known outcomes.
func Validate(n *store.NotificationSubscription) error {
	if n.OrgID == "" {
		return fmt.Errorf("orgId is required")
	}
	if len(n.Outcomes) == 0 {
		return fmt.Errorf("at least one outcome is required (failed, fixed, succeeded, held)")
	}
	for _, o := range n.Outcomes {
		if !slices.Contains(AllOutcomes, Outcome(o)) {
			return fmt.Errorf("unknown outcome %q: use failed, fixed, succeeded or held", o)
		}
	}
	switch Channel(n.Channel) {
	case ChannelWebhook, ChannelSlack:
		u, err := url.Parse(n.Target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("target must be an http(s) URL for a %s subscription", n.Channel)
		}
		if Channel(n.Channel) == ChannelWebhook && len(n.Secret) < 16 {
			return fmt.Errorf("a webhook subscription needs a signing secret of at least 16 characters")
		}
	case ChannelEmail:
		if _, err := mail.ParseAddressList(n.Target); err != nil {
			return fmt.Errorf("target must be comma-separated email addresses: %v", err)
		}
	default:
		return fmt.Errorf("unknown channel %q: use webhook, slack or email", n.Channel)
	}
	return nil
}

// RedactedTarget is a subscription's target as listings show it: a URL's
// scheme and host only (a Slack URL's path is its credential), email
// addresses in full.
func RedactedTarget(n *store.NotificationSubscription) string {
	if Channel(n.Channel) == ChannelEmail {
		return n.Target
	}
	u, err := url.Parse(n.Target)
	if err != nil {
		return "(invalid)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
