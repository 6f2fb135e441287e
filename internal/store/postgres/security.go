package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"kici.dev/kici/internal/store"
)

var _ store.SecurityStore = (*Store)(nil)

type pgExecQueryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func insertAccessLog(ctx context.Context, q pgExecQueryer, e *store.AccessLogEntry) error {
	if e == nil {
		return nil
	}
	if e.At.IsZero() {
		e.At = now()
	}
	return q.QueryRow(ctx, `INSERT INTO access_log (at, token_id, token_label, role, action, resource, routing_key, detail)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8) RETURNING id`, ts(e.At), e.TokenID, e.TokenLabel, e.Role, e.Action, e.Resource, e.RoutingKey, e.Detail).Scan(&e.ID)
}

// CreateAdminTokenAudited inserts a (possibly scoped) admin token and its
// audit row in one transaction.
func (s *Store) CreateAdminTokenAudited(ctx context.Context, t *store.AdminToken, routingKey string, audit *store.AccessLogEntry) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO admin_tokens (id, label, role, token_hash, expires_at, revoked, created_at, routing_key)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, t.ID, t.Label, t.Role, t.TokenHash, tsPtr(t.ExpiresAt), t.Revoked, ts(t.CreatedAt), routingKey); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// AdminTokenRoutingKey returns a token's routing-key scope.
func (s *Store) AdminTokenRoutingKey(ctx context.Context, id string) (string, error) {
	var rk string
	err := s.pool.QueryRow(ctx, `SELECT routing_key FROM admin_tokens WHERE id = $1`, id).Scan(&rk)
	return rk, mapErr(err)
}

// ListAdminTokenRoutingKeys returns the scope of every scoped token.
func (s *Store) ListAdminTokenRoutingKeys(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, routing_key FROM admin_tokens WHERE routing_key <> ''`)
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE admin_tokens SET revoked = true WHERE id = $1 AND NOT revoked`, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
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
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agent_tokens (`+agentTokenCols+`, mandatory_labels) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
			t.ID, t.TokenHash, t.Prefix, t.Kind, t.BoundAgentID, labels, tsPtr(t.ExpiresAt), tsPtr(t.RevokedAt), ts(t.CreatedAt), mandatory); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// AgentTokenMandatoryLabels returns a token's mandatory labels.
func (s *Store) AgentTokenMandatoryLabels(ctx context.Context, id string) ([]string, error) {
	var raw *string
	if err := s.pool.QueryRow(ctx, `SELECT mandatory_labels FROM agent_tokens WHERE id = $1`, id).Scan(&raw); err != nil {
		return nil, mapErr(err)
	}
	if raw == nil || *raw == "" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(*raw), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeAgentTokenAudited revokes a live agent token with its audit row.
func (s *Store) RevokeAgentTokenAudited(ctx context.Context, id string, at time.Time, audit *store.AccessLogEntry) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := affected(tx.Exec(ctx, `UPDATE agent_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, ts(at), id)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// ListSecretScopes returns org's scope names, sorted.
func (s *Store) ListSecretScopes(ctx context.Context, orgID string) ([]string, error) {
	return queryStrings(ctx, s.pool, `SELECT scope FROM secret_scopes WHERE org_id = $1 ORDER BY scope`, orgID)
}

// CreateSecretScope creates an empty scope; ErrConflict if it exists.
func (s *Store) CreateSecretScope(ctx context.Context, orgID, scope string, audit *store.AccessLogEntry) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO secret_scopes (org_id, scope, created_at) VALUES ($1,$2,$3)`, orgID, scope, now()); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// DeleteSecretScope deletes a scope and its secrets.
func (s *Store) DeleteSecretScope(ctx context.Context, orgID, scope string, audit *store.AccessLogEntry) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM scoped_secrets WHERE org_id = $1 AND scope = $2`, orgID, scope); err != nil {
			return err
		}
		if err := affected(tx.Exec(ctx, `DELETE FROM secret_scopes WHERE org_id = $1 AND scope = $2`, orgID, scope)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// ListSecretKeys returns a scope's key names, sorted.
func (s *Store) ListSecretKeys(ctx context.Context, orgID, scope string) ([]string, error) {
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1 FROM secret_scopes WHERE org_id = $1 AND scope = $2`, orgID, scope).Scan(&one); err != nil {
		return nil, mapErr(err)
	}
	return queryStrings(ctx, s.pool, `SELECT key FROM scoped_secrets WHERE org_id = $1 AND scope = $2 ORDER BY key`, orgID, scope)
}

// PutSecret inserts or replaces a sealed secret, creating its scope.
func (s *Store) PutSecret(ctx context.Context, sec *store.SealedSecret, audit *store.AccessLogEntry) error {
	if sec.UpdatedAt.IsZero() {
		sec.UpdatedAt = now()
	}
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO secret_scopes (org_id, scope, created_at) VALUES ($1,$2,$3) ON CONFLICT DO NOTHING`,
			sec.OrgID, sec.Scope, ts(sec.UpdatedAt)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO scoped_secrets (org_id, scope, key, ciphertext, updated_at) VALUES ($1,$2,$3,$4,$5)
			ON CONFLICT (org_id, scope, key) DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at`,
			sec.OrgID, sec.Scope, sec.Key, sec.Ciphertext, ts(sec.UpdatedAt)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// DeleteSecret deletes one secret; ErrNotFound if absent.
func (s *Store) DeleteSecret(ctx context.Context, orgID, scope, key string, audit *store.AccessLogEntry) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := affected(tx.Exec(ctx, `DELETE FROM scoped_secrets WHERE org_id = $1 AND scope = $2 AND key = $3`, orgID, scope, key)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
}

// GetSecret returns one sealed secret.
func (s *Store) GetSecret(ctx context.Context, orgID, scope, key string) (*store.SealedSecret, error) {
	sec := &store.SealedSecret{OrgID: orgID, Scope: scope, Key: key}
	err := s.pool.QueryRow(ctx, `SELECT ciphertext, updated_at FROM scoped_secrets WHERE org_id = $1 AND scope = $2 AND key = $3`,
		orgID, scope, key).Scan(&sec.Ciphertext, &sec.UpdatedAt)
	if err != nil {
		return nil, mapErr(err)
	}
	sec.UpdatedAt = sec.UpdatedAt.UTC()
	return sec, nil
}

// ListSealedValues returns every value sealed under the master key.
func (s *Store) ListSealedValues(ctx context.Context) ([]*store.SealedValue, error) {
	return listSealed(ctx, s.pool)
}

func listSealed(ctx context.Context, q pgExecQueryer) ([]*store.SealedValue, error) {
	var out []*store.SealedValue
	rows, err := q.Query(ctx, `SELECT org_id, scope, key, ciphertext FROM scoped_secrets ORDER BY org_id, scope, key`)
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
	rows, err = q.Query(ctx, `SELECT kid, encrypted_private_jwk FROM orchestrator_signing_keys ORDER BY kid`)
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

// ResealAll re-encrypts every sealed value in one transaction (rows are
// locked first so a concurrent write waits for the rotation).
func (s *Store) ResealAll(ctx context.Context, reseal func(v *store.SealedValue) ([]byte, error), audit *store.AccessLogEntry) (map[string]int, error) {
	counts := map[string]int{store.SealedKindSecret: 0, store.SealedKindSigningKey: 0}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE scoped_secrets, orchestrator_signing_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
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
				_, err = tx.Exec(ctx, `UPDATE scoped_secrets SET ciphertext = $1 WHERE org_id = $2 AND scope = $3 AND key = $4`, ct, v.OrgID, v.Scope, v.Key)
			case store.SealedKindSigningKey:
				_, err = tx.Exec(ctx, `UPDATE orchestrator_signing_keys SET encrypted_private_jwk = $1 WHERE kid = $2`, ct, v.Kid)
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
	return insertAccessLog(ctx, s.pool, e)
}

// ListAccessLog returns matching entries, newest first.
func (s *Store) ListAccessLog(ctx context.Context, f store.AccessLogFilter) ([]*store.AccessLogEntry, error) {
	limit := store.PageLimit(f.Limit, 100, 1000)
	rows, err := s.pool.Query(ctx, `SELECT id, at, token_id, token_label, role, action, resource, routing_key, detail FROM access_log
		WHERE ($1 = '' OR action = $1) AND ($2 = '' OR token_id = $2) AND ($3 = '' OR routing_key = $3) AND ($4::timestamptz IS NULL OR at > $4)
		ORDER BY at DESC, id DESC LIMIT $5 OFFSET $6`, f.Action, f.TokenID, f.RoutingKey, tsPtr(f.Since), limit, max(f.Offset, 0))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.AccessLogEntry
	for rows.Next() {
		e := &store.AccessLogEntry{}
		if err := rows.Scan(&e.ID, &e.At, &e.TokenID, &e.TokenLabel, &e.Role, &e.Action, &e.Resource, &e.RoutingKey, &e.Detail); err != nil {
			return nil, err
		}
		e.At = e.At.UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

func queryStrings(ctx context.Context, q pgExecQueryer, query string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, query, args...)
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
