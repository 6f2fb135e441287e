package sqlstore

import (
	"context"

	"kici.dev/kici/internal/store"
)

// PutAgentSession records (or replaces) the session of s.AgentID. The
// node_id and live columns belong to the cluster's use of the table
// (internal/agentsessions); a single node leaves them empty and false.
func (s *Store) PutAgentSession(ctx context.Context, a *store.AgentSession) error {
	_, err := s.exec(ctx, `INSERT INTO agent_sessions (agent_id, token_id, resume_hash, node_id, live, updated_at)
		VALUES (?, ?, ?, '', ?, ?)
		ON CONFLICT (agent_id) DO UPDATE SET token_id = excluded.token_id, resume_hash = excluded.resume_hash,
			updated_at = excluded.updated_at`,
		a.AgentID, a.TokenID, a.ResumeHash, false, s.d.ts(now()))
	return mapErr(err)
}

// GetAgentSession returns the session of agentID, or store.ErrNotFound.
func (s *Store) GetAgentSession(ctx context.Context, agentID string) (*store.AgentSession, error) {
	a := &store.AgentSession{AgentID: agentID}
	err := s.queryRow(ctx, `SELECT token_id, resume_hash FROM agent_sessions WHERE agent_id = ?`, agentID).Scan(&a.TokenID, &a.ResumeHash)
	if err != nil {
		return nil, mapErr(err)
	}
	return a, nil
}

// DeleteAgentSession forgets agentID's session opened with tokenID.
func (s *Store) DeleteAgentSession(ctx context.Context, agentID, tokenID string) error {
	_, err := s.exec(ctx, `DELETE FROM agent_sessions WHERE agent_id = ? AND token_id = ?`, agentID, tokenID)
	return mapErr(err)
}
