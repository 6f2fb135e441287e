package web

import (
	"net/http"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/notify"
	"kici.dev/kici/internal/store"
)

// notificationDeliveriesShown is how many recent delivery attempts the
// notifications page lists (newest first).
const notificationDeliveriesShown = 50

type subscriptionRow struct {
	Sub    *store.NotificationSubscription
	Target string // notify.RedactedTarget: no secret of a URL shown
}

type notificationsData struct {
	Subs       []subscriptionRow
	Deliveries []*store.NotificationDelivery
	// CanSeeDeliveries is false without run.read: the deliveries name runs.
	CanSeeDeliveries bool
}

// notificationsPage lists the notification subscriptions (source.read, as
// GET /notifications) and the latest delivery attempts with their status,
// attempts and last error (run.read, as GET /notification-deliveries).
// Both are orchestrator-wide in the API, so a routing-key-scoped token
// sees neither here. Read-only: kici-admin notification manages them.
func (u *UI) notificationsPage(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if !u.require(w, r, p, auth.PermSourceRead, true) {
		return
	}
	ctx := r.Context()
	subs, err := u.d.Store.ListNotificationSubscriptions(ctx, "")
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	d := notificationsData{CanSeeDeliveries: can(p, auth.PermRunRead)}
	for _, n := range subs {
		d.Subs = append(d.Subs, subscriptionRow{Sub: n, Target: notify.RedactedTarget(n)})
	}
	if d.CanSeeDeliveries {
		if d.Deliveries, err = u.d.Store.ListNotificationDeliveries(ctx, store.NotificationDeliveryFilter{Limit: notificationDeliveriesShown}); err != nil {
			u.internalError(w, r, err)
			return
		}
	}
	u.render(w, r, http.StatusOK, "notifications", view{Title: "Notifications", Nav: "notifications", Who: p, CSRF: s.csrf, Live: "refresh", Data: d})
}

// runNotifications are the notification deliveries of one run, for the
// run page (nil for a scoped caller or one without source.read: the API
// serves them to neither).
func (u *UI) runNotifications(r *http.Request, p auth.Principal, runID string) []*store.NotificationDelivery {
	if p.RoutingKey != "" || !can(p, auth.PermRunRead) {
		return nil
	}
	rows, err := u.d.Store.ListNotificationDeliveries(r.Context(), store.NotificationDeliveryFilter{RunID: runID, Limit: 20})
	if err != nil {
		u.log.Warn("web: notification deliveries of a run", "run", runID, "err", err)
		return nil
	}
	return rows
}
