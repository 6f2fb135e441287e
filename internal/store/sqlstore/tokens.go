package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

const agentTokenCols = `id, token_hash, token_prefix, agent_type, created_by, labels, expires_at, revoked_at, created_at`

func scanAgentToken(r scanner) (*store.AgentToken, error) {
	var t store.AgentToken
	if err := r.Scan(&t.ID, &t.TokenHash, &t.Prefix, &t.Kind, &t.BoundAgentID, jsonCol{&t.Labels, "agent token labels"},
		ntcol(&t.ExpiresAt), ntcol(&t.RevokedAt), tcol(&t.CreatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &t, nil
}

// CreateAgentToken inserts an agent token (zero CreatedAt = now);
// ErrConflict on a duplicate id or hash.
func (s *Store) CreateAgentToken(ctx context.Context, t *store.AgentToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	labels, err := jsonArg(t.Labels, t.Labels == nil)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO agent_tokens (`+agentTokenCols+`) VALUES (?,?,?,?,?,?::jsonb,?,?,?)`,
		t.ID, t.TokenHash, t.Prefix, t.Kind, t.BoundAgentID, labels, s.d.tsPtr(t.ExpiresAt), s.d.tsPtr(t.RevokedAt),
		s.d.ts(t.CreatedAt))
	return mapErr(err)
}

// agentTokenSelect reads agentTokenCols with labels (jsonb) as text.
const agentTokenSelect = `SELECT id, token_hash, token_prefix, agent_type, created_by, labels::text, expires_at, revoked_at, created_at FROM agent_tokens`

// GetAgentTokenByHash returns the token with that SHA-256 hex hash, or
// ErrNotFound.
func (s *Store) GetAgentTokenByHash(ctx context.Context, hash string) (*store.AgentToken, error) {
	return scanAgentToken(s.queryRow(ctx, agentTokenSelect+` WHERE token_hash = ?`, hash))
}

// RevokeAgentToken sets revoked_at (the first revocation time is kept);
// ErrNotFound if the id is unknown.
func (s *Store) RevokeAgentToken(ctx context.Context, id string, at time.Time) error {
	return affected(s.exec(ctx, `UPDATE agent_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, s.d.ts(at), id))
}

// ListAgentTokens returns all agent tokens, newest first.
func (s *Store) ListAgentTokens(ctx context.Context) ([]*store.AgentToken, error) {
	rows, err := s.query(ctx, agentTokenSelect+` ORDER BY created_at DESC, id DESC`)
	return collect(rows, err, scanAgentToken)
}

const adminTokenCols = `id, label, role, token_hash, expires_at, revoked, created_at`

// adminTokenReadCols are adminTokenCols and the token's routing-key scope
// (written by CreateAdminTokenAudited).
const adminTokenReadCols = adminTokenCols + `, routing_key`

func scanAdminToken(r scanner) (*store.AdminToken, error) {
	var t store.AdminToken
	if err := r.Scan(&t.ID, &t.Label, &t.Role, &t.TokenHash, ntcol(&t.ExpiresAt), &t.Revoked, tcol(&t.CreatedAt), &t.RoutingKey); err != nil {
		return nil, mapErr(err)
	}
	return &t, nil
}

// CreateAdminToken inserts an admin token (zero CreatedAt = now);
// ErrConflict on a duplicate id or hash.
func (s *Store) CreateAdminToken(ctx context.Context, t *store.AdminToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	_, err := s.exec(ctx, `INSERT INTO admin_tokens (`+adminTokenCols+`) VALUES (?,?,?,?,?,?,?)`,
		t.ID, t.Label, t.Role, t.TokenHash, s.d.tsPtr(t.ExpiresAt), t.Revoked, s.d.ts(t.CreatedAt))
	return mapErr(err)
}

// GetAdminTokenByHash returns the admin token with that hash, or
// ErrNotFound.
func (s *Store) GetAdminTokenByHash(ctx context.Context, hash string) (*store.AdminToken, error) {
	return scanAdminToken(s.queryRow(ctx, `SELECT `+adminTokenReadCols+` FROM admin_tokens WHERE token_hash = ?`, hash))
}

// ListAdminTokens returns all admin tokens, newest first.
func (s *Store) ListAdminTokens(ctx context.Context) ([]*store.AdminToken, error) {
	rows, err := s.query(ctx, `SELECT `+adminTokenReadCols+` FROM admin_tokens ORDER BY created_at DESC, id DESC`)
	return collect(rows, err, scanAdminToken)
}

// RevokeAdminToken marks a token revoked; ErrNotFound if unknown.
func (s *Store) RevokeAdminToken(ctx context.Context, id string) error {
	return affected(s.exec(ctx, `UPDATE admin_tokens SET revoked = true WHERE id = ?`, id))
}
