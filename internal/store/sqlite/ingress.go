package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

var _ store.IngressStore = (*Store)(nil)

// ---------------------------------------------------------------- source settings and secrets

// CreateSourceWithSettings inserts a source, its settings and its secrets
// in one transaction; ErrConflict when the source exists.
func (s *Store) CreateSourceWithSettings(ctx context.Context, src *store.Source, set *store.SourceSettings, secrets []*store.SourceSecret) error {
	if src.CreatedAt.IsZero() {
		src.CreatedAt = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sources (`+sourceCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			src.ID, src.OrgID, src.Name, src.Provider, src.RoutingKey, src.LocalPath, src.VerificationMethod,
			src.WebhookSecret, src.Enabled, ms(src.CreatedAt)); err != nil {
			return mapErr(err)
		}
		if set != nil {
			set.SourceID = src.ID
			if err := putSettings(ctx, tx, set); err != nil {
				return err
			}
		}
		for _, sec := range secrets {
			sec.SourceID = src.ID
			if err := addSecret(ctx, tx, sec); err != nil {
				return err
			}
		}
		return nil
	})
}

func putSettings(ctx context.Context, q queryer, set *store.SourceSettings) error {
	set.UpdatedAt = now()
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `INSERT INTO source_settings (source_id, config, updated_at) VALUES (?,?,?)
		ON CONFLICT (source_id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`,
		set.SourceID, string(b), ms(set.UpdatedAt))
	return mapErr(err)
}

func addSecret(ctx context.Context, q queryer, sec *store.SourceSecret) error {
	if sec.ID == "" {
		sec.ID = uuid.NewString()
	}
	if sec.CreatedAt.IsZero() {
		sec.CreatedAt = now()
	}
	_, err := q.ExecContext(ctx, `INSERT INTO source_secrets (id, source_id, secret, created_at, revoked_at) VALUES (?,?,?,?,?)`,
		sec.ID, sec.SourceID, sec.Secret, ms(sec.CreatedAt), msPtr(sec.RevokedAt))
	return mapErr(err)
}

// PutSourceSettings inserts or replaces a source's settings.
func (s *Store) PutSourceSettings(ctx context.Context, set *store.SourceSettings) error {
	return putSettings(ctx, s.db, set)
}

// GetSourceSettings returns a source's settings, or ErrNotFound.
func (s *Store) GetSourceSettings(ctx context.Context, sourceID string) (*store.SourceSettings, error) {
	var cfg string
	var upd int64
	if err := s.db.QueryRowContext(ctx, `SELECT config, updated_at FROM source_settings WHERE source_id = ?`, sourceID).Scan(&cfg, &upd); err != nil {
		return nil, mapErr(err)
	}
	var set store.SourceSettings
	if err := json.Unmarshal([]byte(cfg), &set); err != nil {
		return nil, err
	}
	set.SourceID = sourceID
	set.UpdatedAt = time.UnixMilli(upd).UTC()
	return &set, nil
}

// AddSourceSecret inserts a webhook secret (a new id and now when unset).
func (s *Store) AddSourceSecret(ctx context.Context, sec *store.SourceSecret) error {
	return addSecret(ctx, s.db, sec)
}

// ListSourceSecrets returns a source's secrets, oldest first.
func (s *Store) ListSourceSecrets(ctx context.Context, sourceID string, activeOnly bool) ([]*store.SourceSecret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, source_id, secret, created_at, revoked_at FROM source_secrets
		WHERE source_id = ? AND (? = 0 OR revoked_at IS NULL) ORDER BY created_at, id`, sourceID, activeOnly)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r scanner) (*store.SourceSecret, error) {
		var sec store.SourceSecret
		var created int64
		var revoked sql.NullInt64
		if err := r.Scan(&sec.ID, &sec.SourceID, &sec.Secret, &created, &revoked); err != nil {
			return nil, err
		}
		sec.CreatedAt = time.UnixMilli(created).UTC()
		sec.RevokedAt = fromMs(revoked)
		return &sec, nil
	})
}

// RevokeSourceSecret marks an active secret revoked.
func (s *Store) RevokeSourceSecret(ctx context.Context, sourceID, secretID string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE source_secrets SET revoked_at = ? WHERE id = ? AND source_id = ? AND revoked_at IS NULL`,
		ms(at), secretID, sourceID)
	return affected(res, err)
}

// SetSourceEnabled pauses or resumes a source.
func (s *Store) SetSourceEnabled(ctx context.Context, id string, enabled bool) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sources SET enabled = ? WHERE id = ?`, enabled, id)
	return affected(res, err)
}

// DeleteSource removes a source, what only it owns, and writes audit, in
// one transaction. History rows (deliveries, event log, rejected
// deliveries, runs, jobs) are not touched.
func (s *Store) DeleteSource(ctx context.Context, id string, audit *store.AccessLogEntry) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var rk string
		if err := tx.QueryRowContext(ctx, `SELECT routing_key FROM sources WHERE id = ?`, id).Scan(&rk); err != nil {
			return mapErr(err)
		}
		for _, q := range []string{
			`DELETE FROM source_settings WHERE source_id = ?`,
			`DELETE FROM source_secrets WHERE source_id = ?`,
			`DELETE FROM registrations WHERE source_id = ?`,
			`DELETE FROM sources WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return mapErr(err)
			}
		}
		// A GitHub App's routing key is shared by every source of that App:
		// its overrides stay while another source still carries the key.
		if rk != "" {
			if _, err := tx.ExecContext(ctx, `DELETE FROM context_source_overrides WHERE routing_key = ?
				AND NOT EXISTS (SELECT 1 FROM sources WHERE routing_key = ?)`, rk, rk); err != nil {
				return mapErr(err)
			}
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// ---------------------------------------------------------------- event log

const eventLogCols = `id, delivery_id, org_id, source_id, routing_key, event, action, source, provider, repo_identifier, ref, status,
	matched_count, run_ids, error_message, payload_gz, payload_size_bytes, payload_hash, payload_omitted_reason, received_at, processed_at`

func insertEventLog(ctx context.Context, q queryer, e *store.EventLogEntry, primary bool) error {
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = now()
	}
	var runIDs any
	if e.RunIDs != nil {
		runIDs = listArg(e.RunIDs)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO event_log (is_primary, `+eventLogCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		primary, e.ID, e.DeliveryID, e.OrgID, e.SourceID, e.RoutingKey, e.Event, e.Action, e.Source, e.Provider,
		e.RepoIdentifier, e.Ref, e.Status, e.MatchedCount, runIDs, e.ErrorMessage, e.PayloadGz, e.PayloadSizeBytes,
		e.PayloadHash, e.PayloadOmittedReason, ms(e.ReceivedAt), msPtr(e.ProcessedAt))
	return mapErr(err)
}

func scanEventLog(r scanner) (*store.EventLogEntry, error) {
	var e store.EventLogEntry
	var runIDs sql.NullString
	var received int64
	var processed sql.NullInt64
	if err := r.Scan(&e.ID, &e.DeliveryID, &e.OrgID, &e.SourceID, &e.RoutingKey, &e.Event, &e.Action, &e.Source, &e.Provider,
		&e.RepoIdentifier, &e.Ref, &e.Status, &e.MatchedCount, &runIDs, &e.ErrorMessage, &e.PayloadGz, &e.PayloadSizeBytes,
		&e.PayloadHash, &e.PayloadOmittedReason, &received, &processed); err != nil {
		return nil, mapErr(err)
	}
	if err := decodeJSON(runIDs, &e.RunIDs); err != nil {
		return nil, err
	}
	e.ReceivedAt = time.UnixMilli(received).UTC()
	e.ProcessedAt = fromMs(processed)
	return &e, nil
}

// AcceptDelivery inserts the delivery and its event-log entry atomically;
// ErrConflict (nothing written) when the delivery id exists.
func (s *Store) AcceptDelivery(ctx context.Context, d *store.Delivery, e *store.EventLogEntry) error {
	d.Status = store.DeliveryReceived
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var payload any
		if len(d.Payload) > 0 {
			payload = []byte(d.Payload)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (`+deliveryCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			d.ID, d.SourceID, d.OrgID, d.Event, payload, d.Status, d.Error, rawArg(d.Decisions),
			ms(d.ReceivedAt), msPtr(d.ProcessedAt)); err != nil {
			return mapErr(err)
		}
		e.DeliveryID, e.Status, e.ReceivedAt = d.ID, store.EventLogReceived, d.ReceivedAt
		return insertEventLog(ctx, tx, e, true)
	})
}

// RecordDuplicate inserts a duplicate event-log entry.
func (s *Store) RecordDuplicate(ctx context.Context, e *store.EventLogEntry) error {
	e.Status = store.EventLogDuplicate
	return insertEventLog(ctx, s.db, e, false)
}

// FinishDeliveryOutcome finishes the delivery and its event-log entry in one
// transaction.
func (s *Store) FinishDeliveryOutcome(ctx context.Context, id, status, errText string, decisions json.RawMessage, o store.EventOutcome) error {
	at := now()
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = ?, error = ?, decisions = ?, processed_at = ? WHERE id = ?`,
			status, errText, rawArg(decisions), ms(at), id)
		if err := affected(res, err); err != nil {
			return err
		}
		var runIDs any
		if o.RunIDs != nil {
			runIDs = listArg(o.RunIDs)
		}
		_, err = tx.ExecContext(ctx, `UPDATE event_log SET status = ?, matched_count = ?, run_ids = ?, error_message = ?, processed_at = ?,
			repo_identifier = CASE WHEN ? = '' THEN repo_identifier ELSE ? END,
			ref = CASE WHEN ? = '' THEN ref ELSE ? END,
			action = CASE WHEN ? = '' THEN action ELSE ? END
			WHERE delivery_id = ? AND is_primary = 1`,
			o.Status, o.MatchedCount, runIDs, errText, ms(at), o.RepoIdentifier, o.RepoIdentifier, o.Ref, o.Ref, o.Action, o.Action, id)
		return mapErr(err)
	})
}

// ListEventLog returns matching entries newest first and the total count.
func (s *Store) ListEventLog(ctx context.Context, f store.EventLogFilter) ([]*store.EventLogEntry, int, error) {
	var c conds
	if f.OrgID != "" {
		c.add("org_id = ?", f.OrgID)
	}
	if f.RoutingKey != "" {
		c.add("routing_key = ?", f.RoutingKey)
	}
	if f.Event != "" {
		c.add("event = ?", f.Event)
	}
	if f.Action != "" {
		c.add("action = ?", f.Action)
	}
	if f.Status != "" {
		c.add("status = ?", f.Status)
	}
	if f.DeliveryID != "" {
		c.add("instr(delivery_id, ?) > 0", f.DeliveryID)
	}
	if f.From != nil {
		c.add("received_at >= ?", ms(*f.From))
	}
	if f.To != nil {
		c.add("received_at <= ?", ms(*f.To))
	}
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM event_log`+c.where(), c.args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, args := c.page(store.PageLimit(f.Limit, 50, 0), max(f.Offset, 0))
	rows, err := s.db.QueryContext(ctx, `SELECT `+eventLogCols+` FROM event_log`+c.where()+` ORDER BY received_at DESC, id DESC`+page, args...)
	if err != nil {
		return nil, 0, err
	}
	out, err := collect(rows, scanEventLog)
	return out, total, err
}

// GetEventLog returns the primary entry of a delivery, or ErrNotFound.
func (s *Store) GetEventLog(ctx context.Context, orgID, deliveryID string) (*store.EventLogEntry, error) {
	return scanEventLog(s.db.QueryRowContext(ctx, `SELECT `+eventLogCols+` FROM event_log
		WHERE delivery_id = ? AND is_primary = 1 AND (? = '' OR org_id = ?)`, deliveryID, orgID, orgID))
}

// ---------------------------------------------------------------- rejected deliveries

// RecordRejected inserts a rejected-delivery record.
func (s *Store) RecordRejected(ctx context.Context, r *store.RejectedDelivery) error {
	if r.ID == "" {
		r.ID = uuid.NewString()
	}
	if r.ReceivedAt.IsZero() {
		r.ReceivedAt = now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO rejected_deliveries (id, source_id, org_id, route, delivery_header, event, status_code,
		reason, remote_addr, payload_size_bytes, payload_hash, received_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.ID, r.SourceID, r.OrgID, r.Route, r.DeliveryHeader, r.Event, r.StatusCode, r.Reason, r.RemoteAddr,
		r.PayloadSizeBytes, r.PayloadHash, ms(r.ReceivedAt))
	if err != nil {
		return mapErr(err)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM rejected_deliveries WHERE source_id = ?1 AND received_at <
		(SELECT received_at FROM rejected_deliveries WHERE source_id = ?1 ORDER BY received_at DESC, id DESC LIMIT 1 OFFSET ?2)`,
		r.SourceID, store.MaxRejectedPerSource-1)
	return mapErr(err)
}

// ListRejected returns rejected deliveries newest first.
func (s *Store) ListRejected(ctx context.Context, sourceID string, limit int) ([]*store.RejectedDelivery, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, source_id, org_id, route, delivery_header, event, status_code, reason, remote_addr,
		payload_size_bytes, payload_hash, received_at FROM rejected_deliveries WHERE ?1 = '' OR source_id = ?1
		ORDER BY received_at DESC, id DESC LIMIT ?2`, sourceID, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r scanner) (*store.RejectedDelivery, error) {
		var d store.RejectedDelivery
		var at int64
		if err := r.Scan(&d.ID, &d.SourceID, &d.OrgID, &d.Route, &d.DeliveryHeader, &d.Event, &d.StatusCode, &d.Reason,
			&d.RemoteAddr, &d.PayloadSizeBytes, &d.PayloadHash, &at); err != nil {
			return nil, err
		}
		d.ReceivedAt = time.UnixMilli(at).UTC()
		return &d, nil
	})
}

// ---------------------------------------------------------------- registrations

const registrationCols = `id, org_id, source_id, routing_key, provider, repo_identifier, repo_url, ref, sha, workflow_name, trigger_types, workflow, created_at`

func scanRegistration(r scanner) (*store.Registration, error) {
	var g store.Registration
	var types, wf string
	var created int64
	if err := r.Scan(&g.ID, &g.OrgID, &g.SourceID, &g.RoutingKey, &g.Provider, &g.RepoIdentifier, &g.RepoURL, &g.Ref, &g.SHA,
		&g.WorkflowName, &types, &wf, &created); err != nil {
		return nil, mapErr(err)
	}
	if err := json.Unmarshal([]byte(types), &g.TriggerTypes); err != nil {
		return nil, err
	}
	g.Workflow = json.RawMessage(wf)
	g.CreatedAt = time.UnixMilli(created).UTC()
	return &g, nil
}

// ReplaceRegistrations replaces every registration of (sourceID, repo).
func (s *Store) ReplaceRegistrations(ctx context.Context, sourceID, repo string, regs []*store.Registration) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM registrations WHERE source_id = ? AND repo_identifier = ?`, sourceID, repo); err != nil {
			return err
		}
		for _, g := range regs {
			if g.ID == "" {
				g.ID = uuid.NewString()
			}
			if g.CreatedAt.IsZero() {
				g.CreatedAt = now()
			}
			g.SourceID, g.RepoIdentifier = sourceID, repo
			if _, err := tx.ExecContext(ctx, `INSERT INTO registrations (`+registrationCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
				g.ID, g.OrgID, g.SourceID, g.RoutingKey, g.Provider, g.RepoIdentifier, g.RepoURL, g.Ref, g.SHA, g.WorkflowName,
				listArg(g.TriggerTypes), string(g.Workflow), ms(g.CreatedAt)); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}

// ListRegistrations returns matching registrations, oldest first.
func (s *Store) ListRegistrations(ctx context.Context, f store.RegistrationFilter) ([]*store.Registration, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+registrationCols+` FROM registrations
		WHERE (?1 = '' OR org_id = ?1) AND (?2 = '' OR routing_key = ?2) AND (?3 = '' OR repo_identifier = ?3)
		AND (?4 = '' OR EXISTS (SELECT 1 FROM json_each(trigger_types) WHERE value = ?4))
		ORDER BY created_at, id`, f.OrgID, f.RoutingKey, f.RepoIdentifier, f.TriggerType)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanRegistration)
}

// GetRegistration returns a registration by id, or ErrNotFound.
func (s *Store) GetRegistration(ctx context.Context, id string) (*store.Registration, error) {
	return scanRegistration(s.db.QueryRowContext(ctx, `SELECT `+registrationCols+` FROM registrations WHERE id = ?`, id))
}

// ---------------------------------------------------------------- leases

// AcquireLease takes or renews a named lease.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	at := now()
	res, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = ?2 OR leases.expires_at <= ?4`, name, holder, ms(at.Add(ttl)), ms(at))
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}
