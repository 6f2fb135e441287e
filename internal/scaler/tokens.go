package scaler

import (
	"context"
	"time"
)

// TokenIssuer mints ephemeral agent tokens (auth.AgentAuth).
type TokenIssuer interface {
	// IssueEphemeralFor mints a token bound to agentID whose label scope
	// is labels (fixed at mint) and that expires after ttl.
	IssueEphemeralFor(ctx context.Context, agentID string, labels []string, ttl time.Duration) (string, error)
	// RevokeBound revokes the tokens bound to agentID; called once the
	// agent has ended, so its token cannot be used again.
	RevokeBound(ctx context.Context, agentID string) (int, error)
}

// revokeToken revokes the ephemeral token of an agent that has ended (or
// never started): a token is good for one agent's life only.
func (m *Manager) revokeToken(agentID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.opts.Tokens.RevokeBound(ctx, agentID); err != nil {
		m.log.Warn("revoke ended agent's token", "agent", agentID, "err", err)
	}
}
