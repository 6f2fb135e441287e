package storetest

import (
	"errors"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// testNotifications: subscriptions round-trip with their secrets, an
// outcome is enqueued once, a row is claimed by one holder at a time,
// failures are retried at their time and a delivery ends the row.
func testNotifications(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	sub := &store.NotificationSubscription{ID: "n1", OrgID: "org", WorkflowName: "ci", Outcomes: []string{"failed", "fixed"},
		Channel: "webhook", Target: "https://hooks.example/x", Secret: "0123456789abcdef", Enabled: true, CreatedAt: at(0)}
	must(t, s.CreateNotificationSubscription(ctx, sub))
	if err := s.CreateNotificationSubscription(ctx, sub); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate id: %v", err)
	}
	got, err := s.GetNotificationSubscription(ctx, "n1")
	must(t, err)
	if d := diff(sub, got); d != "" {
		t.Errorf("subscription round trip: %s", d)
	}
	if l, _ := s.ListNotificationSubscriptions(ctx, "other"); len(l) != 0 {
		t.Errorf("other org lists %d", len(l))
	}

	d := &store.NotificationDelivery{ID: "d1", SubscriptionID: "n1", OrgID: "org", RunID: "run-1", Outcome: "failed", Channel: "webhook",
		Payload: []byte(`{"event":"run.failed"}`), Status: apitypes.NotificationPending, CreatedAt: at(1)}
	if ok, err := s.EnqueueNotification(ctx, d); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	d2 := *d
	d2.ID = "d1-again"
	if ok, err := s.EnqueueNotification(ctx, &d2); err != nil || ok {
		t.Errorf("same subscription, run and outcome enqueued again: %v %v", ok, err)
	}
	due, err := s.ListDueNotifications(ctx, at(2), 10)
	must(t, err)
	if len(due) != 1 || string(due[0].Payload) != `{"event":"run.failed"}` {
		t.Fatalf("due: %+v", due)
	}
	if ok, _ := s.ClaimNotification(ctx, "d1", "node-a", at(2), at(60)); !ok {
		t.Fatal("first claim refused")
	}
	if ok, _ := s.ClaimNotification(ctx, "d1", "node-b", at(3), at(60)); ok {
		t.Error("a live claim was taken by another node")
	}
	if due, _ := s.ListDueNotifications(ctx, at(3), 10); len(due) != 0 {
		t.Error("a claimed row is listed as due")
	}
	must(t, s.RecordNotificationAttempt(ctx, "d1", store.NotificationAttempt{At: at(4), Err: "HTTP 502", StatusCode: 502, NextAttemptAt: ptime(at(30))}))
	if due, _ := s.ListDueNotifications(ctx, at(10), 10); len(due) != 0 {
		t.Error("row due before its retry time")
	}
	if ok, _ := s.ClaimNotification(ctx, "d1", "node-b", at(31), at(90)); !ok {
		t.Fatal("retry claim refused")
	}
	must(t, s.RecordNotificationAttempt(ctx, "d1", store.NotificationAttempt{OK: true, At: at(32)}))
	rows, err := s.ListNotificationDeliveries(ctx, store.NotificationDeliveryFilter{RunID: "run-1"})
	must(t, err)
	if len(rows) != 1 || rows[0].Status != apitypes.NotificationDelivered || rows[0].Attempts != 2 || rows[0].LastError != "" || rows[0].DeliveredAt == nil ||
		!rows[0].DeliveredAt.Equal(at(32)) {
		t.Errorf("after delivery: %+v", rows)
	}
	if err := s.RecordNotificationAttempt(ctx, "nope", store.NotificationAttempt{OK: true, At: at(1)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown row: %v", err)
	}

	run := fullRun("run-done", at(0))
	run.Status = status.RunFailed
	run.CompletedAt = ptime(at(50))
	must(t, s.CreateRun(ctx, run, []*store.Job{{ID: "j-done", JobName: "a", BaseJobName: "a", Status: status.JobFailed, CreatedAt: at(0)}}))
	if l, err := s.ListRunsCompletedSince(ctx, at(49), 10); err != nil || len(l) != 1 || l[0].ID != "run-done" {
		t.Errorf("completed since: %v %v", l, err)
	}
	if l, _ := s.ListRunsCompletedSince(ctx, at(50), 10); len(l) != 0 {
		t.Errorf("completed since is not strict: %d", len(l))
	}

	must(t, s.DeleteNotificationSubscription(ctx, "n1"))
	if rows, _ := s.ListNotificationDeliveries(ctx, store.NotificationDeliveryFilter{SubscriptionID: "n1"}); len(rows) != 0 {
		t.Errorf("outbox rows outlive their subscription: %d", len(rows))
	}
	if err := s.DeleteNotificationSubscription(ctx, "n1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}
