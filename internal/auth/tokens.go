// Package auth holds kici's credentials: agent tokens (pre-shared keys that
// agents present on the WebSocket handshake), admin API bearer tokens, and the
// role-based permission table that gates every admin route.
//
// Only the SHA-256 hex digest of a token plaintext is ever stored, with a
// 12-character display prefix (KiCI agent/token-store.ts, admin_tokens).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

// Token plaintext prefixes. Agent tokens follow KiCI ("kat_"); admin tokens
// carry a recognisable "kadm_" prefix so a leaked one can be found by secret
// scanners (KiCI admin tokens are bare hex).
const (
	AgentTokenPrefix = "kat_"
	AdminTokenPrefix = "kadm_"
)

// DisplayPrefixLen is the number of leading plaintext characters kept for
// display (token_prefix).
const DisplayPrefixLen = 12

// NewAgentTokenPlaintext returns a fresh agent token: "kat_" followed by 64
// lowercase hex characters (32 random bytes).
func NewAgentTokenPlaintext() string { return AgentTokenPrefix + randomHex(32) }

// NewAdminTokenPlaintext returns a fresh admin token: "kadm_" followed by 64
// lowercase hex characters (32 random bytes).
func NewAdminTokenPlaintext() string { return AdminTokenPrefix + randomHex(32) }

// Hash returns the lowercase hex SHA-256 digest of a token plaintext, the only
// form in which tokens are stored.
func Hash(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// Prefix returns the first 12 characters of a token plaintext (the whole
// string when shorter), shown in listings to identify a token.
func Prefix(plaintext string) string {
	if len(plaintext) <= DisplayPrefixLen {
		return plaintext
	}
	return plaintext[:DisplayPrefixLen]
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand never fails on supported platforms; a failure means the
		// process cannot mint secrets at all.
		panic(fmt.Sprintf("auth: crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b)
}

// ErrInvalidToken is wrapped by AgentAuth.Validate when the presented token is
// unknown, revoked or expired. Any other error from Validate is an
// infrastructure failure (the store could not be read), which callers must not
// report to an agent as a permanent authentication failure.
var ErrInvalidToken = errors.New("invalid agent token")

// AgentAuth validates agent tokens and issues ephemeral ones for
// scaler-spawned agents.
type AgentAuth struct {
	st  store.Store
	now func() time.Time
}

// NewAgentAuth returns an AgentAuth backed by st.
func NewAgentAuth(st store.Store) *AgentAuth {
	return &AgentAuth{st: st, now: func() time.Time { return time.Now().UTC() }}
}

// IssueEphemeral mints an ephemeral agent token bound to agentID (an agent
// registering with it under any other id is refused) that expires after ttl
// (ttl <= 0 means one hour, KiCI KICI_AGENT_TOKEN_TTL_MS default). It stores
// the hash and returns the plaintext, which is never persisted.
func (a *AgentAuth) IssueEphemeral(ctx context.Context, agentID string, ttl time.Duration) (string, error) {
	return a.IssueEphemeralFor(ctx, agentID, nil, ttl)
}

// IssueEphemeralFor is IssueEphemeral with the agent's labels fixed at mint:
// a non-nil labels list is the token's label scope, so an agent registering
// with it may claim no other label (its kici:os/arch/host platform labels
// excepted). The scaler passes the label set it spawns the agent for.
func (a *AgentAuth) IssueEphemeralFor(ctx context.Context, agentID string, labels []string, ttl time.Duration) (string, error) {
	if agentID == "" {
		return "", errors.New("auth: ephemeral token needs an agent id")
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	plain := NewAgentTokenPlaintext()
	now := a.now()
	exp := now.Add(ttl)
	t := &store.AgentToken{
		ID:           uuid.NewString(),
		TokenHash:    Hash(plain),
		Prefix:       Prefix(plain),
		Kind:         store.AgentTokenEphemeral,
		BoundAgentID: agentID,
		Labels:       labels,
		ExpiresAt:    &exp,
		CreatedAt:    now,
	}
	if err := a.st.CreateAgentToken(ctx, t); err != nil {
		return "", fmt.Errorf("auth: store ephemeral token: %w", err)
	}
	return plain, nil
}

// IssueStatic mints a static (non-expiring, shareable) agent token. A non-nil
// labels list is the token's authorised label scope: an agent using it may
// only claim those labels (plus its kici:os/arch/host platform labels).
// It returns the plaintext (shown once) and the stored row.
func (a *AgentAuth) IssueStatic(ctx context.Context, labels []string) (string, *store.AgentToken, error) {
	plain := NewAgentTokenPlaintext()
	t := &store.AgentToken{
		ID:        uuid.NewString(),
		TokenHash: Hash(plain),
		Prefix:    Prefix(plain),
		Kind:      store.AgentTokenStatic,
		Labels:    labels,
		CreatedAt: a.now(),
	}
	if err := a.st.CreateAgentToken(ctx, t); err != nil {
		return "", nil, fmt.Errorf("auth: store static token: %w", err)
	}
	return plain, t, nil
}

// Validate looks the plaintext up by hash and returns the token row when it is
// usable: not revoked and either without expiry or expiring in the future.
// Unknown, revoked and expired tokens yield an error wrapping ErrInvalidToken
// whose text says which; store failures are returned as other errors.
func (a *AgentAuth) Validate(ctx context.Context, plaintext string) (*store.AgentToken, error) {
	if plaintext == "" {
		return nil, fmt.Errorf("%w: empty token", ErrInvalidToken)
	}
	t, err := a.st.GetAgentTokenByHash(ctx, Hash(plaintext))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown token", ErrInvalidToken)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: look up agent token: %w", err)
	}
	if t.RevokedAt != nil {
		return nil, fmt.Errorf("%w: token revoked", ErrInvalidToken)
	}
	if t.ExpiresAt != nil && !t.ExpiresAt.After(a.now()) {
		return nil, fmt.Errorf("%w: token expired", ErrInvalidToken)
	}
	return t, nil
}

// RevokeBound revokes every live ephemeral token bound to agentID (the
// scaler calls it when that agent's process or container has ended, so its
// credential cannot be used again). It returns how many were revoked.
func (a *AgentAuth) RevokeBound(ctx context.Context, agentID string) (int, error) {
	toks, err := a.st.ListAgentTokens(ctx)
	if err != nil {
		return 0, fmt.Errorf("auth: list agent tokens: %w", err)
	}
	n := 0
	for _, t := range toks {
		if t.Kind != store.AgentTokenEphemeral || t.BoundAgentID != agentID || t.RevokedAt != nil {
			continue
		}
		if err := a.st.RevokeAgentToken(ctx, t.ID, a.now()); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, fmt.Errorf("auth: revoke agent token: %w", err)
		}
		n++
	}
	return n, nil
}
