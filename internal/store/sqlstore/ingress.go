package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	return s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `INSERT INTO sources (`+sourceCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			src.ID, src.OrgID, src.Name, src.Provider, src.RoutingKey, src.LocalPath, src.VerificationMethod,
			src.WebhookSecret, src.Enabled, s.d.ts(src.CreatedAt)); err != nil {
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

func putSettings(ctx context.Context, q conn, set *store.SourceSettings) error {
	set.UpdatedAt = now()
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `INSERT INTO source_settings (source_id, config, updated_at) VALUES (?,?,?)
		ON CONFLICT (source_id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`,
		set.SourceID, string(b), q.d.ts(set.UpdatedAt))
	return mapErr(err)
}

func addSecret(ctx context.Context, q conn, sec *store.SourceSecret) error {
	if sec.ID == "" {
		sec.ID = uuid.NewString()
	}
	if sec.CreatedAt.IsZero() {
		sec.CreatedAt = now()
	}
	_, err := q.exec(ctx, `INSERT INTO source_secrets (id, source_id, secret, created_at, revoked_at) VALUES (?,?,?,?,?)`,
		sec.ID, sec.SourceID, sec.Secret, q.d.ts(sec.CreatedAt), q.d.tsPtr(sec.RevokedAt))
	return mapErr(err)
}

// PutSourceSettings inserts or replaces a source's settings.
func (s *Store) PutSourceSettings(ctx context.Context, set *store.SourceSettings) error {
	return putSettings(ctx, s.conn, set)
}

// GetSourceSettings returns a source's settings, or ErrNotFound.
func (s *Store) GetSourceSettings(ctx context.Context, sourceID string) (*store.SourceSettings, error) {
	var cfg string
	var upd time.Time
	if err := s.queryRow(ctx, `SELECT config, updated_at FROM source_settings WHERE source_id = ?`, sourceID).Scan(&cfg, tcol(&upd)); err != nil {
		return nil, mapErr(err)
	}
	return decodeSettings(sourceID, cfg, upd)
}

// decodeSettings is a source_settings row as SourceSettings.
func decodeSettings(sourceID, cfg string, upd time.Time) (*store.SourceSettings, error) {
	var set store.SourceSettings
	if err := json.Unmarshal([]byte(cfg), &set); err != nil {
		return nil, err
	}
	set.SourceID = sourceID
	set.UpdatedAt = upd
	return &set, nil
}

// AddSourceSecret inserts a webhook secret (a new id and now when unset).
func (s *Store) AddSourceSecret(ctx context.Context, sec *store.SourceSecret) error {
	return addSecret(ctx, s.conn, sec)
}

// ListSourceSecrets returns a source's secrets, oldest first.
func (s *Store) ListSourceSecrets(ctx context.Context, sourceID string, activeOnly bool) ([]*store.SourceSecret, error) {
	rows, err := s.query(ctx, `SELECT id, source_id, secret, created_at, revoked_at FROM source_secrets
		WHERE source_id = ? AND (NOT ? OR revoked_at IS NULL) ORDER BY created_at, id`, sourceID, activeOnly)
	return collect(rows, err, func(r scanner) (*store.SourceSecret, error) {
		var sec store.SourceSecret
		if err := r.Scan(&sec.ID, &sec.SourceID, &sec.Secret, tcol(&sec.CreatedAt), ntcol(&sec.RevokedAt)); err != nil {
			return nil, err
		}
		return &sec, nil
	})
}

// SetSourceWebhookSecret replaces a source's stored webhook secret.
func (s *Store) SetSourceWebhookSecret(ctx context.Context, id, stored string) error {
	return affected(s.exec(ctx, `UPDATE sources SET webhook_secret = ? WHERE id = ?`, stored, id))
}

// SetSourceSecretValue replaces a webhook secret's stored value.
func (s *Store) SetSourceSecretValue(ctx context.Context, secretID, stored string) error {
	return affected(s.exec(ctx, `UPDATE source_secrets SET secret = ? WHERE id = ?`, stored, secretID))
}

// RevokeSourceSecret marks an active secret revoked.
func (s *Store) RevokeSourceSecret(ctx context.Context, sourceID, secretID string, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE source_secrets SET revoked_at = ? WHERE id = ? AND source_id = ? AND revoked_at IS NULL`,
		s.d.ts(at), secretID, sourceID)
	return affected(res, err)
}

// SetSourceEnabled pauses or resumes a source.
func (s *Store) SetSourceEnabled(ctx context.Context, id string, enabled bool) error {
	res, err := s.exec(ctx, `UPDATE sources SET enabled = ? WHERE id = ?`, enabled, id)
	return affected(res, err)
}

// DeleteSource removes a source, what only it owns, and writes audit, in
// one transaction. History rows (deliveries, event log, rejected
// deliveries, runs, jobs) are not touched.
func (s *Store) DeleteSource(ctx context.Context, id string, audit *store.AccessLogEntry) error {
	return s.tx(ctx, func(tx conn) error {
		var rk string
		// Locked on PostgreSQL: a concurrent delete of the same source waits
		// and then finds nothing (ErrNotFound) instead of writing a second
		// audit row.
		if err := tx.queryRow(ctx, `SELECT routing_key FROM sources WHERE id = ?`+s.d.forUpdate(), id).Scan(&rk); err != nil {
			return mapErr(err)
		}
		for _, q := range []string{
			`DELETE FROM source_settings WHERE source_id = ?`,
			`DELETE FROM source_secrets WHERE source_id = ?`,
			`DELETE FROM registrations WHERE source_id = ?`,
			`DELETE FROM sources WHERE id = ?`,
		} {
			if _, err := tx.exec(ctx, q, id); err != nil {
				return mapErr(err)
			}
		}
		// A GitHub App's routing key is shared by every source of that App:
		// its overrides stay while another source still carries the key.
		if rk != "" {
			if _, err := tx.exec(ctx, `DELETE FROM context_source_overrides WHERE routing_key = ?
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

func insertEventLog(ctx context.Context, q conn, e *store.EventLogEntry, primary bool) error {
	_, err := q.exec(ctx, `INSERT INTO event_log (is_primary, `+eventLogCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		eventLogArgs(q.d, e, primary)...)
	return mapErr(err)
}

// eventLogArgs are is_primary and e's values in eventLogCols order; it
// gives e an id and a receive time when it has none.
func eventLogArgs(d *Dialect, e *store.EventLogEntry, primary bool) []any {
	if e.ID == "" {
		// Time-ordered (RFC 9562 version 7): one entry per delivery, and
		// a random key would put each insert on a random index page.
		e.ID = uuid.Must(uuid.NewV7()).String()
	}
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = now()
	}
	var runIDs any
	if e.RunIDs != nil {
		runIDs, _ = jsonArg(e.RunIDs, false)
	}
	return []any{primary, e.ID, e.DeliveryID, e.OrgID, e.SourceID, e.RoutingKey, e.Event, e.Action, e.Source, e.Provider,
		e.RepoIdentifier, e.Ref, e.Status, e.MatchedCount, runIDs, e.ErrorMessage, e.PayloadGz, e.PayloadSizeBytes,
		e.PayloadHash, e.PayloadOmittedReason, d.ts(e.ReceivedAt), d.tsPtr(e.ProcessedAt)}
}

func scanEventLog(r scanner) (*store.EventLogEntry, error) {
	var e store.EventLogEntry
	if err := r.Scan(&e.ID, &e.DeliveryID, &e.OrgID, &e.SourceID, &e.RoutingKey, &e.Event, &e.Action, &e.Source, &e.Provider,
		&e.RepoIdentifier, &e.Ref, &e.Status, &e.MatchedCount, jsonCol{&e.RunIDs, "event log run_ids"}, &e.ErrorMessage, &e.PayloadGz, &e.PayloadSizeBytes,
		&e.PayloadHash, &e.PayloadOmittedReason, tcol(&e.ReceivedAt), ntcol(&e.ProcessedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &e, nil
}

// RecordDuplicate inserts a duplicate event-log entry.
func (s *Store) RecordDuplicate(ctx context.Context, e *store.EventLogEntry) error {
	e.Status = store.EventLogDuplicate
	return insertEventLog(ctx, s.conn, e, false)
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
		c.add(s.d.strpos()+"(delivery_id, ?) > 0", f.DeliveryID)
	}
	if f.From != nil {
		c.add("received_at >= ?", s.d.ts(*f.From))
	}
	if f.To != nil {
		c.add("received_at <= ?", s.d.ts(*f.To))
	}
	var total int
	if err := s.queryRow(ctx, `SELECT count(*) FROM event_log`+c.where(), c.args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	page, args := c.page(store.PageLimit(f.Limit, 50, 0), max(f.Offset, 0))
	rows, err := s.query(ctx, `SELECT `+eventLogCols+` FROM event_log`+c.where()+` ORDER BY received_at DESC, id DESC`+page, args...)
	out, err := collect(rows, err, scanEventLog)
	return out, total, err
}

// GetEventLog returns the primary entry of a delivery, or ErrNotFound.
func (s *Store) GetEventLog(ctx context.Context, orgID, deliveryID string) (*store.EventLogEntry, error) {
	return scanEventLog(s.queryRow(ctx, `SELECT `+eventLogCols+` FROM event_log
		WHERE delivery_id = ? AND is_primary AND (? = '' OR org_id = ?)`, deliveryID, orgID, orgID))
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
	_, err := s.exec(ctx, `INSERT INTO rejected_deliveries (id, source_id, org_id, route, delivery_header, event, status_code,
		reason, remote_addr, payload_size_bytes, payload_hash, received_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.ID, r.SourceID, r.OrgID, r.Route, r.DeliveryHeader, r.Event, r.StatusCode, r.Reason, r.RemoteAddr,
		r.PayloadSizeBytes, r.PayloadHash, s.d.ts(r.ReceivedAt))
	if err != nil {
		return mapErr(err)
	}
	// The cut-off is the receive time of the cap-th newest record: how ties
	// in received_at are ordered does not change it, so the sub-select
	// walks the (source_id, received_at DESC) index instead of sorting the
	// source's records on every insert.
	_, err = s.exec(ctx, `DELETE FROM rejected_deliveries WHERE source_id = ?1 AND received_at <
		(SELECT received_at FROM rejected_deliveries WHERE source_id = ?1 ORDER BY received_at DESC LIMIT 1 OFFSET ?2)`,
		r.SourceID, store.MaxRejectedPerSource-1)
	return mapErr(err)
}

// ListRejected returns rejected deliveries newest first.
func (s *Store) ListRejected(ctx context.Context, sourceID string, limit int) ([]*store.RejectedDelivery, error) {
	if limit <= 0 {
		limit = 100
	}
	var c conds
	if sourceID != "" {
		c.add("source_id = ?", sourceID)
	}
	rows, err := s.query(ctx, `SELECT id, source_id, org_id, route, delivery_header, event, status_code, reason, remote_addr,
		payload_size_bytes, payload_hash, received_at FROM rejected_deliveries`+c.where()+`
		ORDER BY received_at DESC, id DESC LIMIT ?`, append(c.args, limit)...)
	return collect(rows, err, func(r scanner) (*store.RejectedDelivery, error) {
		var d store.RejectedDelivery
		if err := r.Scan(&d.ID, &d.SourceID, &d.OrgID, &d.Route, &d.DeliveryHeader, &d.Event, &d.StatusCode, &d.Reason,
			&d.RemoteAddr, &d.PayloadSizeBytes, &d.PayloadHash, tcol(&d.ReceivedAt)); err != nil {
			return nil, err
		}
		return &d, nil
	})
}

// ---------------------------------------------------------------- registrations

const registrationCols = `id, org_id, source_id, routing_key, provider, repo_identifier, repo_url, ref, sha, workflow_name, trigger_types, workflow, created_at`

func scanRegistration(r scanner) (*store.Registration, error) {
	var g store.Registration
	var types, wf string
	if err := r.Scan(&g.ID, &g.OrgID, &g.SourceID, &g.RoutingKey, &g.Provider, &g.RepoIdentifier, &g.RepoURL, &g.Ref, &g.SHA,
		&g.WorkflowName, &types, &wf, tcol(&g.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	if err := json.Unmarshal([]byte(types), &g.TriggerTypes); err != nil {
		return nil, err
	}
	g.Workflow = json.RawMessage(wf)
	return &g, nil
}

// ReplaceRegistrations replaces every registration of (sourceID, repo).
func (s *Store) ReplaceRegistrations(ctx context.Context, sourceID, repo string, regs []*store.Registration) error {
	return s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `DELETE FROM registrations WHERE source_id = ? AND repo_identifier = ?`, sourceID, repo); err != nil {
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
			if _, err := tx.exec(ctx, `INSERT INTO registrations (`+registrationCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
				g.ID, g.OrgID, g.SourceID, g.RoutingKey, g.Provider, g.RepoIdentifier, g.RepoURL, g.Ref, g.SHA, g.WorkflowName,
				stringList(g.TriggerTypes), string(g.Workflow), s.d.ts(g.CreatedAt)); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}

// ListRegistrations returns matching registrations, oldest first.
func (s *Store) ListRegistrations(ctx context.Context, f store.RegistrationFilter) ([]*store.Registration, error) {
	rows, err := s.query(ctx, `SELECT `+registrationCols+` FROM registrations WHERE `+s.registrationCond()+`
		ORDER BY created_at, id`, f.OrgID, f.RoutingKey, f.RepoIdentifier, f.TriggerType)
	return collect(rows, err, scanRegistration)
}

// HasRegistrations reports whether a registration matches f, in one
// EXISTS statement.
func (s *Store) HasRegistrations(ctx context.Context, f store.RegistrationFilter) (bool, error) {
	var found bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registrations WHERE `+s.registrationCond()+`)`,
		f.OrgID, f.RoutingKey, f.RepoIdentifier, f.TriggerType).Scan(&found)
	return found, mapErr(err)
}

// registrationCond is the WHERE condition of a store.RegistrationFilter
// over parameters ?1 (org), ?2 (routing key), ?3 (repository) and ?4
// (trigger type), each "" for any.
func (s *Store) registrationCond() string {
	return `(?1 = '' OR org_id = ?1) AND (?2 = '' OR routing_key = ?2) AND (?3 = '' OR repo_identifier = ?3)
		AND (?4 = '' OR ` + s.d.jsonArrayHas("trigger_types", "?4") + `)`
}

// GetRegistration returns a registration by id, or ErrNotFound.
func (s *Store) GetRegistration(ctx context.Context, id string) (*store.Registration, error) {
	return scanRegistration(s.queryRow(ctx, `SELECT `+registrationCols+` FROM registrations WHERE id = ?`, id))
}

// ---------------------------------------------------------------- leases

// AcquireLease takes or renews a named lease.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	at := now()
	res, err := s.exec(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = ?2 OR leases.expires_at <= ?4`, name, holder, s.d.ts(at.Add(ttl)), s.d.ts(at))
	return changed(res, err)
}

// ScrubSourceSecrets rewrites the storage of the sources and
// source_secrets tables so that values they held before an in-place
// rewrite (plaintext webhook secrets sealed since) are gone from the
// files, not just unreferenced: SQLite VACUUMs the database and truncates
// its write-ahead log; PostgreSQL rewrites the two tables (VACUUM FULL,
// a short exclusive lock on two small tables).
func (s *Store) ScrubSourceSecrets(ctx context.Context) error {
	stmts := []string{`VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`}
	if s.d.Postgres {
		stmts = []string{`VACUUM FULL sources, source_secrets`}
	}
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// ingressSourceQuery reads a source (sourceCols, in scanSource's order),
// its settings and its secrets in one statement: one row per secret (one with NULL secret columns when it has
// none), the source's and settings' columns repeated on each. A source has
// a handful of secrets at most, so the repetition costs less than the two
// round trips it saves on every delivery.
const ingressSourceQuery = `SELECT s.id, s.org_id, s.name, s.provider, s.routing_key, s.local_path, s.verification_method,
	s.webhook_secret, s.enabled, s.created_at, st.config, st.updated_at, sec.id, sec.secret, sec.created_at, sec.revoked_at
	FROM sources s
	LEFT JOIN source_settings st ON st.source_id = s.id
	LEFT JOIN source_secrets sec ON sec.source_id = s.id
	WHERE `

// GetIngressSource returns source id with its settings and secrets, in
// one statement; ErrNotFound for an unknown id.
func (s *Store) GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error) {
	rows, err := s.query(ctx, ingressSourceQuery+`s.id = ? ORDER BY sec.created_at, sec.id`, id)
	return scanIngressSource(rows, err)
}

// GetIngressSourceByName returns the source named name in org with its
// settings and secrets, in one statement; ErrNotFound when there is none.
func (s *Store) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	rows, err := s.query(ctx, ingressSourceQuery+`s.org_id = ? AND s.name = ? ORDER BY sec.created_at, sec.id`, orgID, name)
	return scanIngressSource(rows, err)
}

// SourceRevision returns the value that migration source_revision's
// triggers draw anew (random, 64 bits) in every transaction changing
// sources, source_settings or source_secrets, whoever makes it: a look-up
// that reads the same value as an earlier one knows, but for odds of one
// in 2^64, that the three tables hold what they held then.
// SQLite only (PostgreSQL announces the changes with NOTIFY, migration
// source_change_notify): on PostgreSQL it returns an error.
func (s *Store) SourceRevision(ctx context.Context) (int64, error) {
	if s.d.Postgres {
		return 0, errors.New("source revision: kept on SQLite only; PostgreSQL announces source changes with NOTIFY")
	}
	var rev int64
	if err := s.queryRow(ctx, `SELECT rev FROM source_revision WHERE id = 1`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("source revision: %w", mapErr(err))
	}
	return rev, nil
}

// scanIngressSource folds ingressSourceQuery's rows into one
// IngressSource; no row is ErrNotFound.
func scanIngressSource(rows *sql.Rows, err error) (*store.IngressSource, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out *store.IngressSource
	for rows.Next() {
		var cfg, secID, secVal sql.NullString
		var setUpd, secCreated, secRevoked *time.Time
		src, err := scanSource(trailing{rows, []any{&cfg, ntcol(&setUpd), &secID, &secVal, ntcol(&secCreated), ntcol(&secRevoked)}})
		if err != nil {
			return nil, mapErr(err)
		}
		if out == nil {
			out = &store.IngressSource{Source: src}
			if cfg.Valid {
				var upd time.Time
				if setUpd != nil {
					upd = *setUpd
				}
				if out.Settings, err = decodeSettings(src.ID, cfg.String, upd); err != nil {
					return nil, err
				}
			}
		}
		if secID.Valid {
			sec := &store.SourceSecret{ID: secID.String, SourceID: src.ID, Secret: secVal.String, RevokedAt: secRevoked}
			if secCreated != nil {
				sec.CreatedAt = *secCreated
			}
			out.Secrets = append(out.Secrets, sec)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	if out == nil {
		return nil, store.ErrNotFound
	}
	return out, nil
}
