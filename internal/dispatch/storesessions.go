package dispatch

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	"kici.dev/kici/internal/store"
)

// StoreSessions keeps the agent sessions of a single node in its store
// (store.AgentSession), so that they survive an orchestrator restart: an
// agent that reconnects after the restart presents its resume token and
// reclaims its jobs, while a registration of the same id without it (any
// holder of an agent token can name any id) starts a new session that
// reclaims nothing — the old session's jobs fail as lost, as they would
// without a restart. A cluster uses internal/agentsessions instead; one
// node has no other node for a session to be live on.
type StoreSessions struct {
	st store.Store
}

// NewStoreSessions returns the sessions kept in st.
func NewStoreSessions(st store.Store) *StoreSessions { return &StoreSessions{st: st} }

// Check implements SharedSessions; liveElsewhere is always false.
func (s *StoreSessions) Check(ctx context.Context, agentID, tokenID, presented, _ string) (exists, resumed, liveElsewhere bool, err error) {
	a, err := s.st.GetAgentSession(ctx, agentID)
	if errors.Is(err, store.ErrNotFound) {
		return false, false, false, nil
	}
	if err != nil {
		return false, false, false, err
	}
	if presented != "" && a.TokenID == tokenID {
		h := sha256.Sum256([]byte(presented))
		resumed = subtle.ConstantTimeCompare(h[:], a.ResumeHash) == 1
	}
	return true, resumed, false, nil
}

// Hold implements SharedSessions: it records the session's token and the
// SHA-256 of its resume token.
func (s *StoreSessions) Hold(ctx context.Context, agentID, tokenID, resume, _ string) error {
	h := sha256.Sum256([]byte(resume))
	return s.st.PutAgentSession(ctx, &store.AgentSession{AgentID: agentID, TokenID: tokenID, ResumeHash: h[:]})
}

// Release implements SharedSessions: a closed socket keeps its session
// (the agent may come back with its resume token).
func (s *StoreSessions) Release(context.Context, string, string) error { return nil }

// End implements SharedSessions.
func (s *StoreSessions) End(ctx context.Context, agentID, tokenID string) error {
	return s.st.DeleteAgentSession(ctx, agentID, tokenID)
}
