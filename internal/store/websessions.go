package store

import (
	"context"
	"time"

	"kici.dev/kici/internal/api/apitypes"
)

// WebSessionKind says what a web UI session stands for; apitypes', as the
// admin API serves it.
type WebSessionKind = apitypes.WebSessionKind

// Kinds of WebSession, apitypes' constants.
const (
	// WebSessionToken is a session opened with an admin token.
	WebSessionToken = apitypes.WebSessionToken
	// WebSessionPerson is a session of a person signed in through an
	// identity provider.
	WebSessionPerson = apitypes.WebSessionPerson
)

// WebSession is one signed-in browser of the web UI. The cookie value is
// never stored, only its SHA-256 (CookieHash), so a copy of the table lets
// no one sign in. The row is shared by every node of a cluster and
// survives restarts.
type WebSession struct {
	// ID is the session's public id (UUID), shown by `kici-admin
	// session list` and used to revoke it.
	ID string
	// CookieHash is the lowercase hex SHA-256 of the cookie value.
	CookieHash string
	// CSRF is the session's form token (double-checked on every POST).
	CSRF string
	Kind WebSessionKind
	// TokenHash is the admin token's hash of a token session.
	TokenHash string
	// Subject is the person's identity ("oidc:<issuer-host>:<sub>",
	// "github:<login>", "gitea:<login>", "gitlab:<login>"), or for a
	// token session "service:<token id>".
	Subject string
	// Name is how the UI shows the person (name or login).
	Name string
	// Role and RoutingKey are the person's mapped role and routing-key
	// scope ("" = unscoped); empty for a token session.
	Role, RoutingKey string
	// Client is the address the session was opened from.
	Client string
	// CreatedAt is the sign-in time; LastSeenAt the last request's
	// (updated at most once a minute, see the web package).
	CreatedAt, LastSeenAt time.Time
}

// WebSessionStore keeps the web UI's sessions.
type WebSessionStore interface {
	// CreateWebSession inserts s; ErrConflict when its id or cookie hash
	// exists.
	CreateWebSession(ctx context.Context, s *WebSession) error
	// GetWebSessionByCookie returns the session whose cookie hashes to
	// cookieHash, or ErrNotFound. Expiry is the caller's check.
	GetWebSessionByCookie(ctx context.Context, cookieHash string) (*WebSession, error)
	// TouchWebSession sets the last-seen time of session id; ErrNotFound
	// when it no longer exists.
	TouchWebSession(ctx context.Context, id string, at time.Time) error
	// ListWebSessions returns the sessions of subject ("" = all), newest
	// first.
	ListWebSessions(ctx context.Context, subject string) ([]*WebSession, error)
	// DeleteWebSession ends session id; ErrNotFound when unknown.
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteWebSessionsOf ends every session of subject and returns how
	// many there were.
	DeleteWebSessionsOf(ctx context.Context, subject string) (int, error)
	// DeleteExpiredWebSessions deletes sessions last seen before
	// idleBefore or created before createdBefore; returns how many.
	DeleteExpiredWebSessions(ctx context.Context, idleBefore, createdBefore time.Time) (int, error)
}
