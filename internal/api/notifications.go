package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/store"
)

// NotificationViewOf maps a subscription to its API view (target
// redacted, no secret).
func NotificationViewOf(n *store.NotificationSubscription) apitypes.NotificationView {
	return apitypes.NotificationView{ID: n.ID, OrgID: n.OrgID, SourceID: n.SourceID, WorkflowName: n.WorkflowName, Outcomes: n.Outcomes,
		Channel: n.Channel, Target: notify.RedactedTarget(n), Enabled: n.Enabled, CreatedAt: n.CreatedAt}
}

// createNotification serves POST /notifications: validates and stores a
// subscription (400 with the reason; 404 for an unknown source of
// another org). A webhook without a secret gets a generated one, answered
// once.
func (s *server) createNotification(w http.ResponseWriter, r *http.Request) {
	var b apitypes.NotificationCreate
	if !decodeBody(w, r, &b) {
		return
	}
	outcomes, err := notify.ParseOutcomes(strings.Join(b.Outcomes, ","))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n := &store.NotificationSubscription{ID: uuid.NewString(), OrgID: b.OrgID, SourceID: b.SourceID, WorkflowName: b.WorkflowName,
		Channel: b.Channel, Target: b.Target, Secret: b.Secret, Enabled: true, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	for _, o := range outcomes {
		n.Outcomes = append(n.Outcomes, string(o))
	}
	generated := ""
	if notify.Channel(n.Channel) == notify.ChannelWebhook && n.Secret == "" {
		buf := make([]byte, 24)
		_, _ = rand.Read(buf)
		n.Secret = hex.EncodeToString(buf)
		generated = n.Secret
	}
	if err := notify.Validate(n); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if n.SourceID != "" {
		src, err := s.d.Store.GetSource(r.Context(), n.SourceID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && src.OrgID != n.OrgID) {
			writeError(w, http.StatusNotFound, "Source "+n.SourceID+" not found in org "+n.OrgID)
			return
		} else if err != nil {
			s.internalError(w, r, err)
			return
		}
	}
	if err := s.d.Store.CreateNotificationSubscription(r.Context(), n); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apitypes.NotificationCreated{NotificationView: NotificationViewOf(n), Secret: generated})
}

// listNotifications serves GET /notifications?orgId=: subscriptions,
// oldest first (every org without orgId).
func (s *server) listNotifications(w http.ResponseWriter, r *http.Request) {
	rows, err := s.d.Store.ListNotificationSubscriptions(r.Context(), r.URL.Query().Get("orgId"))
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.NotificationView, 0, len(rows))
	for _, n := range rows {
		out = append(out, NotificationViewOf(n))
	}
	writeJSON(w, http.StatusOK, apitypes.NotificationList{Notifications: out})
}

// deleteNotification serves DELETE /notifications/{id}: the subscription
// and its outbox rows (404 when unknown).
func (s *server) deleteNotification(w http.ResponseWriter, r *http.Request) {
	err := s.d.Store.DeleteNotificationSubscription(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Notification subscription not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.Deleted{Deleted: true})
}

// testNotification serves POST /notifications/{id}/test: a test message
// (event run.test) queued in the outbox and delivered like any other;
// GET /notification-deliveries?subscriptionId= shows how it went.
func (s *server) testNotification(w http.ResponseWriter, r *http.Request) {
	n, err := s.d.Store.GetNotificationSubscription(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "Notification subscription not found")
		return
	} else if err != nil {
		s.internalError(w, r, err)
		return
	}
	d := notify.TestDelivery(n, "", time.Now().UTC())
	if _, err := s.d.Store.EnqueueNotification(r.Context(), d); err != nil {
		s.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, apitypes.NotificationTestQueued{DeliveryID: d.ID})
}

// listNotificationDeliveries serves GET /notification-deliveries
// ?subscriptionId=&runId=&status=: outbox rows, newest first, at most 200.
func (s *server) listNotificationDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rows, err := s.d.Store.ListNotificationDeliveries(r.Context(), store.NotificationDeliveryFilter{
		SubscriptionID: q.Get("subscriptionId"), RunID: q.Get("runId"), Status: apitypes.NotificationDeliveryStatus(q.Get("status")), Limit: 200})
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	out := make([]apitypes.NotificationDeliveryView, 0, len(rows))
	for _, d := range rows {
		out = append(out, apitypes.NotificationDeliveryView{ID: d.ID, SubscriptionID: d.SubscriptionID, RunID: d.RunID, Outcome: d.Outcome,
			Channel: d.Channel, Status: d.Status, Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt, LastError: d.LastError,
			LastStatusCode: d.LastStatusCode, DeliveredAt: d.DeliveredAt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, apitypes.NotificationDeliveryList{Deliveries: out})
}
