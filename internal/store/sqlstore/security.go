package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.SecurityStore = (*Store)(nil)

func insertAccessLog(ctx context.Context, q conn, e *store.AccessLogEntry) error {
	if e == nil {
		return nil
	}
	if e.At.IsZero() {
		e.At = now()
	}
	return q.queryRow(ctx, `INSERT INTO access_log (at, token_id, token_label, role, action, resource, routing_key, detail)
		VALUES (?,?,?,?,?,?,?,?) RETURNING id`, q.d.ts(e.At), e.TokenID, e.TokenLabel, e.Role, e.Action, e.Resource, e.RoutingKey,
		e.Detail).Scan(&e.ID)
}

// CreateAdminTokenAudited inserts a (possibly scoped) admin token and its
// audit row in one transaction.
func (s *Store) CreateAdminTokenAudited(ctx context.Context, t *store.AdminToken, routingKey string, audit *store.AccessLogEntry) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	return mapErr(s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `INSERT INTO admin_tokens (id, label, role, token_hash, expires_at, revoked, created_at, routing_key)
			VALUES (?,?,?,?,?,?,?,?)`, t.ID, t.Label, t.Role, t.TokenHash, s.d.tsPtr(t.ExpiresAt), t.Revoked, s.d.ts(t.CreatedAt), routingKey); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// AdminTokenRoutingKey returns a token's routing-key scope.
func (s *Store) AdminTokenRoutingKey(ctx context.Context, id string) (string, error) {
	var rk string
	err := s.queryRow(ctx, `SELECT routing_key FROM admin_tokens WHERE id = ?`, id).Scan(&rk)
	return rk, mapErr(err)
}

// ListAdminTokenRoutingKeys returns the scope of every scoped token.
func (s *Store) ListAdminTokenRoutingKeys(ctx context.Context) (map[string]string, error) {
	rows, err := s.query(ctx, `SELECT id, routing_key FROM admin_tokens WHERE routing_key <> ''`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, rk string
		if err := rows.Scan(&id, &rk); err != nil {
			return nil, err
		}
		out[id] = rk
	}
	return out, rows.Err()
}

// RevokeAdminTokenAudited revokes a live token with its audit row.
func (s *Store) RevokeAdminTokenAudited(ctx context.Context, id string, audit *store.AccessLogEntry) (bool, error) {
	changed := false
	err := s.tx(ctx, func(tx conn) error {
		res, err := tx.exec(ctx, `UPDATE admin_tokens SET revoked = true WHERE id = ? AND NOT revoked`, id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if n == 0 {
			return nil
		}
		changed = true
		return insertAccessLog(ctx, tx, audit)
	})
	return changed, err
}

// CreateAgentTokenAudited inserts an agent token with its audit row.
func (s *Store) CreateAgentTokenAudited(ctx context.Context, t *store.AgentToken, audit *store.AccessLogEntry) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	labels, err := jsonArg(t.Labels, t.Labels == nil)
	if err != nil {
		return err
	}
	mandatory, err := jsonArg(t.MandatoryLabels, len(t.MandatoryLabels) == 0)
	if err != nil {
		return err
	}
	return mapErr(s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `INSERT INTO agent_tokens (`+agentTokenCols+`, mandatory_labels) VALUES (?,?,?,?,?,?::jsonb,?,?,?,?)`,
			t.ID, t.TokenHash, t.Prefix, t.Kind, t.BoundAgentID, labels, s.d.tsPtr(t.ExpiresAt), s.d.tsPtr(t.RevokedAt), s.d.ts(t.CreatedAt), mandatory); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// AgentTokenMandatoryLabels returns a token's mandatory labels.
func (s *Store) AgentTokenMandatoryLabels(ctx context.Context, id string) ([]string, error) {
	var raw sql.NullString
	if err := s.queryRow(ctx, `SELECT mandatory_labels FROM agent_tokens WHERE id = ?`, id).Scan(&raw); err != nil {
		return nil, mapErr(err)
	}
	if !raw.Valid || raw.String == "" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(raw.String), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeAgentTokenAudited revokes a live agent token with its audit row.
func (s *Store) RevokeAgentTokenAudited(ctx context.Context, id string, at time.Time, audit *store.AccessLogEntry) error {
	return s.tx(ctx, func(tx conn) error {
		if err := affected(tx.exec(ctx, `UPDATE agent_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.d.ts(at), id)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// ListSecretScopes returns org's scope names, sorted.
func (s *Store) ListSecretScopes(ctx context.Context, orgID string) ([]string, error) {
	return queryStrings(ctx, s.conn, `SELECT scope FROM secret_scopes WHERE org_id = ? ORDER BY scope`, orgID)
}

// CreateSecretScope creates an empty scope; ErrConflict if it exists.
func (s *Store) CreateSecretScope(ctx context.Context, orgID, scope string, audit *store.AccessLogEntry) error {
	return mapErr(s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `INSERT INTO secret_scopes (org_id, scope, created_at) VALUES (?,?,?)`, orgID, scope, s.d.ts(now())); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// DeleteSecretScope deletes a scope and its secrets.
func (s *Store) DeleteSecretScope(ctx context.Context, orgID, scope string, audit *store.AccessLogEntry) error {
	return s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `DELETE FROM scoped_secrets WHERE org_id = ? AND scope = ?`, orgID, scope); err != nil {
			return err
		}
		if err := affected(tx.exec(ctx, `DELETE FROM secret_scopes WHERE org_id = ? AND scope = ?`, orgID, scope)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// ListSecretKeys returns a scope's key names, sorted.
func (s *Store) ListSecretKeys(ctx context.Context, orgID, scope string) ([]string, error) {
	var one int
	if err := s.queryRow(ctx, `SELECT 1 FROM secret_scopes WHERE org_id = ? AND scope = ?`, orgID, scope).Scan(&one); err != nil {
		return nil, mapErr(err)
	}
	return queryStrings(ctx, s.conn, `SELECT key FROM scoped_secrets WHERE org_id = ? AND scope = ? ORDER BY key`, orgID, scope)
}

// PutSecret inserts or replaces a sealed secret, creating its scope.
func (s *Store) PutSecret(ctx context.Context, sec *store.SealedSecret, audit *store.AccessLogEntry) error {
	if sec.UpdatedAt.IsZero() {
		sec.UpdatedAt = now()
	}
	return mapErr(s.tx(ctx, func(tx conn) error {
		if _, err := tx.exec(ctx, `INSERT INTO secret_scopes (org_id, scope, created_at) VALUES (?,?,?) ON CONFLICT DO NOTHING`,
			sec.OrgID, sec.Scope, s.d.ts(sec.UpdatedAt)); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `INSERT INTO scoped_secrets (org_id, scope, key, ciphertext, updated_at) VALUES (?,?,?,?,?)
			ON CONFLICT (org_id, scope, key) DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at`,
			sec.OrgID, sec.Scope, sec.Key, sec.Ciphertext, s.d.ts(sec.UpdatedAt)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// DeleteSecret deletes one secret; ErrNotFound if absent.
func (s *Store) DeleteSecret(ctx context.Context, orgID, scope, key string, audit *store.AccessLogEntry) error {
	return s.tx(ctx, func(tx conn) error {
		if err := affected(tx.exec(ctx, `DELETE FROM scoped_secrets WHERE org_id = ? AND scope = ? AND key = ?`, orgID, scope, key)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// GetSecret returns one sealed secret.
func (s *Store) GetSecret(ctx context.Context, orgID, scope, key string) (*store.SealedSecret, error) {
	sec := &store.SealedSecret{OrgID: orgID, Scope: scope, Key: key}
	err := s.queryRow(ctx, `SELECT ciphertext, updated_at FROM scoped_secrets WHERE org_id = ? AND scope = ? AND key = ?`,
		orgID, scope, key).Scan(&sec.Ciphertext, tcol(&sec.UpdatedAt))
	if err != nil {
		return nil, mapErr(err)
	}
	return sec, nil
}

// ListSealedValues returns every value sealed under the master key.
func (s *Store) ListSealedValues(ctx context.Context) ([]*store.SealedValue, error) {
	return listSealed(ctx, s.conn)
}

func listSealed(ctx context.Context, q conn) ([]*store.SealedValue, error) {
	var out []*store.SealedValue
	rows, err := q.query(ctx, `SELECT org_id, scope, key, ciphertext FROM scoped_secrets ORDER BY org_id, scope, key`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		v := &store.SealedValue{Kind: store.SealedKindSecret}
		if err := rows.Scan(&v.OrgID, &v.Scope, &v.Key, &v.Ciphertext); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = q.query(ctx, `SELECT kid, encrypted_private_jwk FROM orchestrator_signing_keys ORDER BY kid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		v := &store.SealedValue{Kind: store.SealedKindSigningKey}
		if err := rows.Scan(&v.Kid, &v.Ciphertext); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ResealAll re-encrypts every sealed value in one transaction (on
// PostgreSQL the tables are locked first so a concurrent write waits for
// the rotation; SQLite's transaction holds the write lock).
func (s *Store) ResealAll(ctx context.Context, reseal func(v *store.SealedValue) ([]byte, error), audit *store.AccessLogEntry) (map[string]int, error) {
	counts := map[string]int{store.SealedKindSecret: 0, store.SealedKindSigningKey: 0}
	err := s.tx(ctx, func(tx conn) error {
		if s.d.Postgres {
			if _, err := tx.exec(ctx, `LOCK TABLE scoped_secrets, orchestrator_signing_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		vals, err := listSealed(ctx, tx)
		if err != nil {
			return err
		}
		for _, v := range vals {
			ct, err := reseal(v)
			if err != nil {
				return err
			}
			switch v.Kind {
			case store.SealedKindSecret:
				_, err = tx.exec(ctx, `UPDATE scoped_secrets SET ciphertext = ? WHERE org_id = ? AND scope = ? AND key = ?`, ct, v.OrgID, v.Scope, v.Key)
			case store.SealedKindSigningKey:
				_, err = tx.exec(ctx, `UPDATE orchestrator_signing_keys SET encrypted_private_jwk = ? WHERE kid = ?`, ct, v.Kid)
			default:
				err = errors.New("unknown sealed kind " + v.Kind)
			}
			if err != nil {
				return err
			}
			counts[v.Kind]++
		}
		return insertAccessLog(ctx, tx, audit)
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// AppendAccessLog records one entry.
func (s *Store) AppendAccessLog(ctx context.Context, e *store.AccessLogEntry) error {
	return insertAccessLog(ctx, s.conn, e)
}

// ListAccessLog returns matching entries, newest first.
func (s *Store) ListAccessLog(ctx context.Context, f store.AccessLogFilter) ([]*store.AccessLogEntry, error) {
	limit := store.PageLimit(f.Limit, 100, 1000)
	rows, err := s.query(ctx, `SELECT id, at, token_id, token_label, role, action, resource, routing_key, detail FROM access_log
		WHERE (?1 = '' OR action = ?1) AND (?2 = '' OR token_id = ?2) AND (?3 = '' OR routing_key = ?3) AND (?4::timestamptz IS NULL OR at > ?4)
		ORDER BY at DESC, id DESC LIMIT ?5 OFFSET ?6`, f.Action, f.TokenID, f.RoutingKey, s.d.tsPtr(f.Since), limit, max(f.Offset, 0))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.AccessLogEntry
	for rows.Next() {
		e := &store.AccessLogEntry{}
		if err := rows.Scan(&e.ID, tcol(&e.At), &e.TokenID, &e.TokenLabel, &e.Role, &e.Action, &e.Resource, &e.RoutingKey, &e.Detail); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func queryStrings(ctx context.Context, q conn, query string, args ...any) ([]string, error) {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
