package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.WebSessionStore = (*Store)(nil)

const webSessionCols = `id, cookie_hash, csrf, kind, token_hash, subject, name, role, routing_key, client, created_at, last_seen_at`

// CreateWebSession inserts a web UI session.
func (s *Store) CreateWebSession(ctx context.Context, w *store.WebSession) error {
	_, err := s.exec(ctx, `INSERT INTO web_sessions (`+webSessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.CookieHash, w.CSRF, string(w.Kind), w.TokenHash, w.Subject, w.Name, w.Role, w.RoutingKey, w.Client,
		s.d.ts(w.CreatedAt), s.d.ts(w.LastSeenAt))
	return mapErr(err)
}

type rowScanner interface{ Scan(dest ...any) error }

func scanWebSession(r rowScanner) (*store.WebSession, error) {
	w := &store.WebSession{}
	var kind string
	if err := r.Scan(&w.ID, &w.CookieHash, &w.CSRF, &kind, &w.TokenHash, &w.Subject, &w.Name, &w.Role, &w.RoutingKey, &w.Client,
		tcol(&w.CreatedAt), tcol(&w.LastSeenAt)); err != nil {
		return nil, mapErr(err)
	}
	w.Kind = store.WebSessionKind(kind)
	return w, nil
}

// GetWebSessionByCookie returns the session of a cookie hash.
func (s *Store) GetWebSessionByCookie(ctx context.Context, cookieHash string) (*store.WebSession, error) {
	return scanWebSession(s.queryRow(ctx, `SELECT `+webSessionCols+` FROM web_sessions WHERE cookie_hash = ?`, cookieHash))
}

// TouchWebSession sets a session's last-seen time.
func (s *Store) TouchWebSession(ctx context.Context, id string, at time.Time) error {
	return affected(s.exec(ctx, `UPDATE web_sessions SET last_seen_at = ? WHERE id = ?`, s.d.ts(at), id))
}

// ListWebSessions returns the sessions of subject ("" = all), newest first.
func (s *Store) ListWebSessions(ctx context.Context, subject string) ([]*store.WebSession, error) {
	q, args := `SELECT `+webSessionCols+` FROM web_sessions`, []any{}
	if subject != "" {
		q += ` WHERE subject = ?`
		args = append(args, subject)
	}
	rows, err := s.query(ctx, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.WebSession
	for rows.Next() {
		w, err := scanWebSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// DeleteWebSession ends one session.
func (s *Store) DeleteWebSession(ctx context.Context, id string) error {
	return affected(s.exec(ctx, `DELETE FROM web_sessions WHERE id = ?`, id))
}

// DeleteWebSessionsOf ends every session of subject.
func (s *Store) DeleteWebSessionsOf(ctx context.Context, subject string) (int, error) {
	res, err := s.exec(ctx, `DELETE FROM web_sessions WHERE subject = ?`, subject)
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// DeleteExpiredWebSessions deletes idle and too old sessions.
func (s *Store) DeleteExpiredWebSessions(ctx context.Context, idleBefore, createdBefore time.Time) (int, error) {
	res, err := s.exec(ctx, `DELETE FROM web_sessions WHERE last_seen_at < ? OR created_at < ?`, s.d.ts(idleBefore), s.d.ts(createdBefore))
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
