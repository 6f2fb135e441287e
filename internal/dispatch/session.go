package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/store"
)

// Agent sessions. An agent token proves that a connection may act as *an*
// agent; it does not prove that it is *the* agent process that registered an
// id before. Each successful registration therefore starts a session with a
// random resume token, sent once in register.ack and kept only in the
// agent's memory. A later registration under the same agent id:
//
//   - with the session's resume token is the same agent reconnecting: it may
//     take over a socket the orchestrator still thinks is live (a half-open
//     connection) and reclaim the session's in-flight jobs;
//   - without it, while the id is live, is refused (4003): a second holder
//     of the token cannot take over a running agent's socket and finish its
//     jobs;
//   - without it, while the id is not live, starts a new session that
//     reclaims nothing: the old session's jobs are treated as lost.
//
// Sessions live in this process's memory and, in a cluster, in the shared
// SharedSessions (PostgreSQL), so the rules hold across nodes: a node the
// agent fails over to accepts the resume token another node issued, and
// refuses a registration without it while the id is live on another node.
// On a single node after a restart no session is known, so the first
// registration of each id is accepted as it would be on a first start (its
// in-flight jobs are adopted from the store).
//
// An ephemeral (scaler-minted) token is good for one session: it is revoked
// in the store when that session's job ends, when the agent's socket closes
// for any reason other than an orchestrator shutdown, and (scaler side)
// when the agent process exits. A revoked token is refused at the next
// handshake with 4010, so the agent does not retry.
type agentSession struct {
	tokenID string
	// secret is the SHA-256 of the resume token.
	secret [sha256.Size]byte
}

// newResumeToken returns a fresh resume token: 32 random bytes, hex.
func newResumeToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on supported platforms
	return "krs_" + hex.EncodeToString(b)
}

// resumes reports whether presented is the resume token of the current
// session of agentID opened with token tokenID. Caller holds registry.mu.
func (r *registry) resumesLocked(agentID, tokenID, presented string) bool {
	s := r.sessions[agentID]
	if s == nil || presented == "" || s.tokenID != tokenID {
		return false
	}
	h := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(h[:], s.secret[:]) == 1
}

// knownSessionLocked reports whether this process knows a session for
// agentID. Caller holds registry.mu.
func (r *registry) knownSessionLocked(agentID string) bool { return r.sessions[agentID] != nil }

// startSessionLocked opens a new session for agentID and returns its resume
// token. Caller holds registry.mu.
func (r *registry) startSessionLocked(agentID, tokenID string) string {
	tok := newResumeToken()
	r.sessions[agentID] = &agentSession{tokenID: tokenID, secret: sha256.Sum256([]byte(tok))}
	return tok
}

// endEphemeralSession revokes the ephemeral token of socket c, so that
// nothing can register with it again (see agentSession). Static tokens are
// untouched. Safe to call more than once.
func (r *registry) endEphemeralSession(ctx context.Context, c *agentConn, why string) {
	r.mu.Lock()
	eph, tokenID, id := c.ephemeral, c.tokenID, c.id
	if eph && r.sessions[id] != nil && r.sessions[id].tokenID == tokenID {
		delete(r.sessions, id)
	}
	r.mu.Unlock()
	if !eph || tokenID == "" {
		return
	}
	if r.shared != nil {
		if err := r.shared.End(ctx, id, tokenID); err != nil {
			r.log.Warn("end shared agent session", "agent", id, "err", err)
		}
	}
	if err := r.st.RevokeAgentToken(ctx, tokenID, time.Now().UTC()); err != nil && err != store.ErrNotFound {
		r.log.Warn("revoke ephemeral agent token", "agent", id, "tokenId", tokenID, "err", err)
		return
	}
	r.log.Info("ephemeral agent token revoked", "agent", id, "why", why)
}

// SharedSessions keeps agent sessions where every node of a cluster sees
// them (internal/agentsessions). Errors are store failures.
type SharedSessions interface {
	// Check reports whether agentID has a session, whether presented is
	// its resume token (opened with tokenID), and whether it is live on a
	// node other than node.
	Check(ctx context.Context, agentID, tokenID, presented, node string) (exists, resumed, liveElsewhere bool, err error)
	// Hold records that node holds agentID's socket in the session with
	// resume token resume.
	Hold(ctx context.Context, agentID, tokenID, resume, node string) error
	// Release marks the session not live if node still holds it.
	Release(ctx context.Context, agentID, node string) error
	// End forgets the session opened with tokenID.
	End(ctx context.Context, agentID, tokenID string) error
}

// sharedCheck is the cluster's view of a registration; the zero value
// when there is no shared store.
type sharedCheck struct{ exists, resumed, liveElsewhere bool }

// checkShared consults the shared sessions for a registration. An error
// closes the socket (the agent retries).
func (r *registry) checkShared(ctx context.Context, c *agentConn, tokenID string, reg *protocol.AgentRegister) (sharedCheck, bool) {
	if r.shared == nil {
		return sharedCheck{}, true
	}
	exists, resumed, elsewhere, err := r.shared.Check(ctx, reg.AgentID, tokenID, reg.ResumeToken, r.nodeID)
	if err != nil {
		r.log.Error("agent session lookup", "agent", reg.AgentID, "err", err)
		c.close(protocol.CloseInternalError, "agent sessions unavailable")
		return sharedCheck{}, false
	}
	if elsewhere && !resumed {
		r.log.Warn("refusing a connection for an agent id live on another node without its resume token", "agent", reg.AgentID)
		c.close(protocol.CloseInvalidMessage, "agent id already connected to another node; a reconnect must present its session's resume token")
		return sharedCheck{}, false
	}
	return sharedCheck{exists, resumed, elsewhere}, true
}

// holdShared records in the shared sessions that this node holds c.
func (r *registry) holdShared(ctx context.Context, c *agentConn) {
	if r.shared == nil {
		return
	}
	r.mu.Lock()
	id, tokenID, resume := c.id, c.tokenID, c.resume
	r.mu.Unlock()
	if err := r.shared.Hold(ctx, id, tokenID, resume, r.nodeID); err != nil {
		r.log.Warn("record agent session", "agent", id, "err", err)
	}
}

// adoptSessionLocked makes a session another node opened known here, so a
// later reconnect to this node is verified locally too. Caller holds registry.mu.
func (r *registry) adoptSessionLocked(agentID, tokenID, resume string) {
	r.sessions[agentID] = &agentSession{tokenID: tokenID, secret: sha256.Sum256([]byte(resume))}
}
