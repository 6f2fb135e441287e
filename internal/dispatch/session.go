package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"time"

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
// Sessions live in this process's memory. After an orchestrator restart no
// session is known, so the first registration of each id is accepted as it
// would be on a first start (its in-flight jobs are adopted from the store).
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
// session of agentID opened with token tokenID. Caller holds d.mu.
func (d *Dispatcher) resumesLocked(agentID, tokenID, presented string) bool {
	s := d.sessions[agentID]
	if s == nil || presented == "" || s.tokenID != tokenID {
		return false
	}
	h := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(h[:], s.secret[:]) == 1
}

// knownSessionLocked reports whether this process knows a session for
// agentID. Caller holds d.mu.
func (d *Dispatcher) knownSessionLocked(agentID string) bool { return d.sessions[agentID] != nil }

// startSessionLocked opens a new session for agentID and returns its resume
// token. Caller holds d.mu.
func (d *Dispatcher) startSessionLocked(agentID, tokenID string) string {
	tok := newResumeToken()
	d.sessions[agentID] = &agentSession{tokenID: tokenID, secret: sha256.Sum256([]byte(tok))}
	return tok
}

// endEphemeralSession revokes the ephemeral token of socket c, so that
// nothing can register with it again (see agentSession). Static tokens are
// untouched. Safe to call more than once.
func (d *Dispatcher) endEphemeralSession(ctx context.Context, c *agentConn, why string) {
	d.mu.Lock()
	eph, tokenID, id := c.ephemeral, c.tokenID, c.id
	if eph && d.sessions[id] != nil && d.sessions[id].tokenID == tokenID {
		delete(d.sessions, id)
	}
	d.mu.Unlock()
	if !eph || tokenID == "" {
		return
	}
	if err := d.st.RevokeAgentToken(ctx, tokenID, time.Now().UTC()); err != nil && err != store.ErrNotFound {
		d.log.Warn("revoke ephemeral agent token", "agent", id, "tokenId", tokenID, "err", err)
		return
	}
	d.log.Info("ephemeral agent token revoked", "agent", id, "why", why)
}
