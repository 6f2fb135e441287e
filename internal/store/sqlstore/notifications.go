package sqlstore

import (
	"context"
	"strings"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.NotificationStore = (*Store)(nil)

const notifSubCols = `id, org_id, source_id, workflow_name, outcomes, channel, target, secret, enabled, created_at`

func scanNotifSub(r scanner) (*store.NotificationSubscription, error) {
	var n store.NotificationSubscription
	var outcomes string
	if err := r.Scan(&n.ID, &n.OrgID, &n.SourceID, &n.WorkflowName, &outcomes, &n.Channel, &n.Target, &n.Secret, &n.Enabled,
		tcol(&n.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	n.Outcomes = strings.Split(outcomes, ",")
	return &n, nil
}

// CreateNotificationSubscription inserts a subscription.
func (s *Store) CreateNotificationSubscription(ctx context.Context, n *store.NotificationSubscription) error {
	_, err := s.exec(ctx, `INSERT INTO notification_subscriptions (`+notifSubCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		n.ID, n.OrgID, n.SourceID, n.WorkflowName, strings.Join(n.Outcomes, ","), n.Channel, n.Target, n.Secret, n.Enabled,
		s.d.ts(n.CreatedAt.UTC()))
	return mapErr(err)
}

// GetNotificationSubscription returns one subscription.
func (s *Store) GetNotificationSubscription(ctx context.Context, id string) (*store.NotificationSubscription, error) {
	return scanNotifSub(s.queryRow(ctx, `SELECT `+notifSubCols+` FROM notification_subscriptions WHERE id = ?`, id))
}

// ListNotificationSubscriptions returns an org's subscriptions.
func (s *Store) ListNotificationSubscriptions(ctx context.Context, orgID string) ([]*store.NotificationSubscription, error) {
	q, args := `SELECT `+notifSubCols+` FROM notification_subscriptions`, []any{}
	if orgID != "" {
		q += ` WHERE org_id = ?`
		args = append(args, orgID)
	}
	rows, err := s.query(ctx, q+` ORDER BY created_at, id`, args...)
	return collect(rows, err, scanNotifSub)
}

// DeleteNotificationSubscription removes a subscription and its outbox rows.
func (s *Store) DeleteNotificationSubscription(ctx context.Context, id string) error {
	return s.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `DELETE FROM notification_deliveries WHERE subscription_id = ?`, id); err != nil {
			return mapErr(err)
		}
		res, err := c.exec(ctx, `DELETE FROM notification_subscriptions WHERE id = ?`, id)
		return affected(res, err)
	})
}

const notifDelCols = `id, subscription_id, org_id, run_id, outcome, channel, payload, status, attempts, next_attempt_at,
	last_error, last_status_code, delivered_at, created_at, updated_at`

func scanNotifDel(r scanner) (*store.NotificationDelivery, error) {
	var d store.NotificationDelivery
	var payload []byte
	if err := r.Scan(&d.ID, &d.SubscriptionID, &d.OrgID, &d.RunID, &d.Outcome, &d.Channel, &payload, &d.Status, &d.Attempts,
		ntcol(&d.NextAttemptAt), &d.LastError, &d.LastStatusCode, ntcol(&d.DeliveredAt), tcol(&d.CreatedAt), tcol(&d.UpdatedAt)); err != nil {
		return nil, mapErr(err)
	}
	d.Payload = append([]byte(nil), payload...)
	return &d, nil
}

// EnqueueNotification inserts a pending outbox row unless its
// (subscription, run, outcome) exists.
func (s *Store) EnqueueNotification(ctx context.Context, d *store.NotificationDelivery) (bool, error) {
	t := now()
	if d.CreatedAt.IsZero() {
		d.CreatedAt = t
	}
	res, err := s.exec(ctx, `INSERT INTO notification_deliveries (id, subscription_id, org_id, run_id, outcome, channel, payload,
		status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (subscription_id, run_id, outcome) DO NOTHING`,
		d.ID, d.SubscriptionID, d.OrgID, d.RunID, d.Outcome, d.Channel, []byte(d.Payload), d.Status, s.d.ts(d.CreatedAt.UTC()), s.d.ts(t))
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimNotification takes a due pending row for holder.
func (s *Store) ClaimNotification(ctx context.Context, id, holder string, at, until time.Time) (bool, error) {
	res, err := s.exec(ctx, `UPDATE notification_deliveries SET claimed_by = ?, claimed_until = ?
		WHERE id = ? AND status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
		AND (claimed_until IS NULL OR claimed_until < ?)`,
		holder, s.d.ts(until.UTC()), id, s.d.ts(at.UTC()), s.d.ts(at.UTC()))
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RecordNotificationAttempt stores an attempt and releases the claim.
func (s *Store) RecordNotificationAttempt(ctx context.Context, id string, a store.NotificationAttempt) error {
	at := s.d.ts(a.At.UTC())
	if a.OK {
		res, err := s.exec(ctx, `UPDATE notification_deliveries SET status = 'delivered', attempts = attempts + 1, delivered_at = ?,
			next_attempt_at = NULL, claimed_by = '', claimed_until = NULL, last_error = '', last_status_code = 0, updated_at = ?
			WHERE id = ?`, at, at, id)
		return affected(res, err)
	}
	st := "pending"
	if a.GaveUp {
		st = "failed"
	}
	res, err := s.exec(ctx, `UPDATE notification_deliveries SET status = ?, attempts = attempts + 1, next_attempt_at = ?,
		claimed_by = '', claimed_until = NULL, last_error = ?, last_status_code = ?, updated_at = ? WHERE id = ?`,
		st, s.d.tsPtr(a.NextAttemptAt), a.Err, a.StatusCode, at, id)
	return affected(res, err)
}

// ListDueNotifications returns pending rows due at t and not claimed.
func (s *Store) ListDueNotifications(ctx context.Context, t time.Time, limit int) ([]*store.NotificationDelivery, error) {
	if limit <= 0 {
		limit = 100
	}
	ts := s.d.ts(t.UTC())
	rows, err := s.query(ctx, `SELECT `+notifDelCols+` FROM notification_deliveries
		WHERE status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?) AND (claimed_until IS NULL OR claimed_until < ?)
		ORDER BY created_at, id LIMIT ?`, ts, ts, limit)
	return collect(rows, err, scanNotifDel)
}

// ListNotificationDeliveries returns outbox rows, newest first.
func (s *Store) ListNotificationDeliveries(ctx context.Context, f store.NotificationDeliveryFilter) ([]*store.NotificationDelivery, error) {
	var where []string
	var args []any
	if f.SubscriptionID != "" {
		where, args = append(where, "subscription_id = ?"), append(args, f.SubscriptionID)
	}
	if f.RunID != "" {
		where, args = append(where, "run_id = ?"), append(args, f.RunID)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	q := `SELECT ` + notifDelCols + ` FROM notification_deliveries`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 200
	}
	rows, err := s.query(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)...)
	return collect(rows, err, scanNotifDel)
}

// ListRunsCompletedSince returns runs completed after t.
func (s *Store) ListRunsCompletedSince(ctx context.Context, t time.Time, limit int) ([]*store.Run, error) {
	if limit <= 0 {
		limit = 500
	}
	rows, err := s.query(ctx, `SELECT `+runCols+` FROM execution_runs WHERE completed_at > ? ORDER BY completed_at, id LIMIT ?`,
		s.d.ts(t.UTC()), limit)
	return collect(rows, err, scanRun)
}
