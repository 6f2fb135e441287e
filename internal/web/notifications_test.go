package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// TestNotificationsPageShowsSubscriptionsAndDeliveries: the Notifications
// page lists each subscription (its webhook URL redacted) and the recent
// delivery attempts with their status, attempts and last error; the run
// page shows the run's own deliveries; a routing-key-scoped token sees
// neither, as in the admin API.
func TestNotificationsPageShowsSubscriptionsAndDeliveries(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := &store.NotificationSubscription{ID: "sub-11111111-aaaa", OrgID: "demo", Outcomes: []string{"failed", "fixed"}, Channel: "slack",
		Target: "https://hooks.slack.example/services/T000/B000/secret-token-xyz", Enabled: true, CreatedAt: now}
	if err := h.st.CreateNotificationSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	enqueue := func(id, runID, outcome string) {
		t.Helper()
		if _, err := h.st.EnqueueNotification(ctx, &store.NotificationDelivery{ID: id, SubscriptionID: sub.ID, OrgID: "demo", RunID: runID,
			Outcome: outcome, Channel: "slack", Payload: []byte(`{}`), Status: apitypes.NotificationPending, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("del-ok", h.runID, "failed")
	enqueue("del-retry", "11111111-1111-1111-1111-222222222222", "fixed")
	next := now.Add(time.Minute)
	if err := h.st.RecordNotificationAttempt(ctx, "del-ok", store.NotificationAttempt{OK: true, At: now}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.RecordNotificationAttempt(ctx, "del-retry", store.NotificationAttempt{At: now, Err: "connection refused by hooks.slack.example",
		StatusCode: 503, NextAttemptAt: &next}); err != nil {
		t.Fatal(err)
	}
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	code, body, _ := c.get("/ui/notifications")
	if code != http.StatusOK {
		t.Fatalf("GET /ui/notifications: %d", code)
	}
	mustContain(t, "notifications page", body, `href="/ui/notifications" class="on"`, "failed, fixed", "slack", "https://hooks.slack.example/…",
		`data-delivery-id="del-ok"`, `<span class="badge st-delivered">delivered</span>`,
		`data-delivery-id="del-retry"`, `<span class="badge st-pending">pending</span>`, "HTTP 503", "connection refused by hooks.slack.example", "next ")
	mustNotContain(t, "notifications page", body, "secret-token-xyz")

	_, run, _ := c.get(h.runURL())
	mustContain(t, "run page", run, "<h2>Notifications</h2>", `data-delivery-id="del-ok"`)
	mustNotContain(t, "run page", run, `data-delivery-id="del-retry"`)

	scoped := auth.NewAdminTokenPlaintext()
	tok := &store.AdminToken{ID: "scoped-n", Label: "scoped", Role: string(auth.RoleAdmin), TokenHash: auth.Hash(scoped), CreatedAt: now}
	if err := h.st.CreateAdminTokenAudited(ctx, tok, "generic:demo:src-1", &store.AccessLogEntry{Action: "token.create"}); err != nil {
		t.Fatal(err)
	}
	sc := h.client()
	sc.signIn(scoped)
	if code, _, _ := sc.get("/ui/notifications"); code != http.StatusForbidden {
		t.Errorf("scoped token: GET /ui/notifications %d, want 403", code)
	}
	if _, run, _ := sc.get(h.runURL()); strings.Contains(run, "del-ok") {
		t.Error("scoped token sees the run's notification deliveries")
	}
}
