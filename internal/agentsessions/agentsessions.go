// Package agentsessions keeps agent sessions in PostgreSQL, where every
// orchestrator of a cluster sees them (table agent_sessions, migration
// 00017): which node holds an agent id's socket, with which token, and the
// SHA-256 of the session's resume token. A node an agent fails over to
// verifies the resume token another node issued; a registration for an id
// whose session is live on another node (that node's heartbeat is fresh)
// without that token is refused. See internal/dispatch/session.go for the
// rules and docs/high-availability.md.
package agentsessions

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"kici.dev/kici/internal/pgpool"
)

// Store is the shared session table. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// Fresh is how recent a node's registry heartbeat must be for its
	// sessions to count as live.
	Fresh time.Duration
}

// Open connects to the database at url (migrated by the store).
func Open(ctx context.Context, url string, fresh time.Duration) (*Store, error) {
	pool, err := pgpool.Open(ctx, url, 4)
	if err != nil {
		return nil, fmt.Errorf("agentsessions: %w", err)
	}
	return &Store{pool: pool, Fresh: fresh}, nil
}

// Close releases the connections.
func (s *Store) Close() { s.pool.Close() }

// Check looks at the session of agentID for a registration on node with
// token tokenID presenting resume token presented (may be ""): whether one
// exists, whether presented is its resume token (same token id), and
// whether it is held, live, by another node whose heartbeat is fresh.
func (s *Store) Check(ctx context.Context, agentID, tokenID, presented, node string) (exists, resumed, liveElsewhere bool, err error) {
	var tok, holder string
	var hash []byte
	var live bool
	var beat *time.Time
	err = s.pool.QueryRow(ctx, `SELECT a.token_id, a.resume_hash, a.node_id, a.live, n.heartbeat_at
		FROM agent_sessions a LEFT JOIN cluster_nodes n ON n.id = a.node_id WHERE a.agent_id = $1`, agentID).
		Scan(&tok, &hash, &holder, &live, &beat)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, false, nil
	}
	if err != nil {
		return false, false, false, fmt.Errorf("agentsessions: %w", err)
	}
	if presented != "" && tok == tokenID {
		h := sha256.Sum256([]byte(presented))
		resumed = subtle.ConstantTimeCompare(h[:], hash) == 1
	}
	liveElsewhere = live && holder != node && beat != nil && time.Since(*beat) < s.Fresh
	return true, resumed, liveElsewhere, nil
}

// Hold records that node now holds agentID's socket in the session whose
// resume token is resume (only its SHA-256 is stored).
func (s *Store) Hold(ctx context.Context, agentID, tokenID, resume, node string) error {
	h := sha256.Sum256([]byte(resume))
	_, err := s.pool.Exec(ctx, `INSERT INTO agent_sessions (agent_id, token_id, resume_hash, node_id, live, updated_at)
		VALUES ($1, $2, $3, $4, true, now())
		ON CONFLICT (agent_id) DO UPDATE SET token_id = $2, resume_hash = $3, node_id = $4, live = true, updated_at = now()`,
		agentID, tokenID, h[:], node)
	if err != nil {
		return fmt.Errorf("agentsessions: %w", err)
	}
	return nil
}

// Release marks agentID's session not live, if node still holds it (the
// agent's socket to node closed; another node may hold it already).
func (s *Store) Release(ctx context.Context, agentID, node string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE agent_sessions SET live = false, updated_at = now()
		WHERE agent_id = $1 AND node_id = $2`, agentID, node); err != nil {
		return fmt.Errorf("agentsessions: %w", err)
	}
	return nil
}

// End forgets agentID's session (its ephemeral token was revoked).
func (s *Store) End(ctx context.Context, agentID, tokenID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM agent_sessions WHERE agent_id = $1 AND token_id = $2`, agentID, tokenID); err != nil {
		return fmt.Errorf("agentsessions: %w", err)
	}
	return nil
}
