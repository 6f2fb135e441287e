package sqlstore

import (
	"context"
	"encoding/json"
	"time"

	"kici.dev/kici/internal/store"
)

const sourceCols = `id, org_id, name, provider, routing_key, local_path, verification_method, webhook_secret, enabled, created_at`

func scanSource(r scanner) (*store.Source, error) {
	var src store.Source
	if err := r.Scan(&src.ID, &src.OrgID, &src.Name, &src.Provider, &src.RoutingKey, &src.LocalPath,
		&src.VerificationMethod, &src.WebhookSecret, &src.Enabled, tcol(&src.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &src, nil
}

// CreateSource inserts a source; ErrConflict when its id or (OrgID, Name)
// exists. A zero CreatedAt is set to now.
func (s *Store) CreateSource(ctx context.Context, src *store.Source) error {
	if src.CreatedAt.IsZero() {
		src.CreatedAt = now()
	}
	_, err := s.exec(ctx, `INSERT INTO sources (`+sourceCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		src.ID, src.OrgID, src.Name, src.Provider, src.RoutingKey, src.LocalPath, src.VerificationMethod,
		src.WebhookSecret, src.Enabled, s.d.ts(src.CreatedAt))
	return mapErr(err)
}

// GetSource returns a source by id, or ErrNotFound.
func (s *Store) GetSource(ctx context.Context, id string) (*store.Source, error) {
	return scanSource(s.queryRow(ctx, `SELECT `+sourceCols+` FROM sources WHERE id = ?`, id))
}

// GetSourceByName returns the source named name in org, or ErrNotFound.
func (s *Store) GetSourceByName(ctx context.Context, orgID, name string) (*store.Source, error) {
	return scanSource(s.queryRow(ctx, `SELECT `+sourceCols+` FROM sources WHERE org_id = ? AND name = ?`, orgID, name))
}

// ListSources returns all sources (orgID "" = every org), oldest first.
func (s *Store) ListSources(ctx context.Context, orgID string) ([]*store.Source, error) {
	rows, err := s.query(ctx, `SELECT `+sourceCols+` FROM sources WHERE ?1 = '' OR org_id = ?1 ORDER BY created_at, id`, orgID)
	return collect(rows, err, scanSource)
}

const deliveryCols = `id, source_id, org_id, event, payload, status, error, decisions, received_at, processed_at`

// insertDelivery inserts a delivery's deliveryCols and its claim
// (deliveryArgs).
const insertDelivery = `INSERT INTO deliveries (` + deliveryCols + `, claimed_by, claim_expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`

func scanDelivery(r scanner) (*store.Delivery, error) {
	var d store.Delivery
	var payload []byte
	if err := r.Scan(&d.ID, &d.SourceID, &d.OrgID, &d.Event, &payload, &d.Status, &d.Error, rawCol{&d.Decisions},
		tcol(&d.ReceivedAt), ntcol(&d.ProcessedAt)); err != nil {
		return nil, mapErr(err)
	}
	if len(payload) > 0 {
		d.Payload = json.RawMessage(payload)
	}
	return &d, nil
}

// InsertDelivery persists a delivery (status "received" when empty; a zero
// ReceivedAt is set to now); ErrConflict if its ID exists, in which case
// nothing changes.
func (s *Store) InsertDelivery(ctx context.Context, d *store.Delivery) error {
	if d.Status == "" {
		d.Status = store.DeliveryReceived
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = now()
	}
	_, err := s.exec(ctx, insertDelivery, deliveryArgs(s.d, d)...)
	return mapErr(err)
}

// GetDelivery returns a delivery by id, or ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, id string) (*store.Delivery, error) {
	return scanDelivery(s.queryRow(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, id))
}

// FinishDelivery sets status, error text, decision trace and processed_at
// (now); ErrNotFound if the id is unknown.
func (s *Store) FinishDelivery(ctx context.Context, id string, status store.DeliveryStatus, errText string, decisions json.RawMessage) error {
	return affected(s.exec(ctx, `UPDATE deliveries SET status = ?, error = ?, decisions = ?, processed_at = ?,
			claimed_by = NULL, claim_expires_at = NULL WHERE id = ?`,
		status, errText, rawArg(decisions), s.d.ts(now()), id))
}

// CountUnprocessedDeliveries counts the deliveries still "received" and
// returns the oldest one's receipt time (nil when none).
func (s *Store) CountUnprocessedDeliveries(ctx context.Context) (int, *time.Time, error) {
	var n int
	var oldest *time.Time
	err := s.queryRow(ctx, `SELECT count(*), min(received_at) FROM deliveries WHERE status = ?`, store.DeliveryReceived).Scan(&n, ntcol(&oldest))
	return n, oldest, err
}

// ListUnprocessedDeliveries returns deliveries still "received", oldest
// first; limit <= 0 means no limit.
func (s *Store) ListUnprocessedDeliveries(ctx context.Context, limit int) ([]*store.Delivery, error) {
	q := `SELECT ` + deliveryCols + ` FROM deliveries WHERE status = ? ORDER BY received_at, id`
	args := []any{store.DeliveryReceived}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.query(ctx, q, args...)
	return collect(rows, err, scanDelivery)
}
