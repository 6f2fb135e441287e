package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/store"
)

// Cookie names. The session cookie's path is "/" so that the live pages
// can read the admin API's event streams with it; the sign-in cookie (the
// double-submit CSRF value of the sign-in form) is scoped to the form.
const (
	SessionCookie = "kici_session"
	loginCookie   = "kici_login"
	csrfField     = "csrf"
)

// session is one signed-in browser: its row in the database
// (store.WebSession), shared by every node and kept across restarts. An
// admin-token session keeps only the token's hash, which is resolved
// against the token table on every request, so revoking or expiring the
// token ends the session at once; a person's session carries the role
// mapped at sign-in, and `kici-admin session revoke` ends it at once.
type session struct {
	row  *store.WebSession
	csrf string
}

// touchEvery is how stale a session's last-seen time may get before a
// request writes it again (one write a minute per active browser, not
// one per request); idle expiry is exact to within it.
const touchEvery = time.Minute

// sweepEvery is how often a node deletes expired sessions.
const sweepEvery = 5 * time.Minute

// sessions is the session table, keyed by the SHA-256 of the cookie value
// (a copy of the table alone lets no one sign in).
type sessions struct {
	st        store.WebSessionStore
	idle, max time.Duration
	now       func() time.Time

	mu        sync.Mutex
	lastSweep time.Time
}

func newSessions(st store.WebSessionStore, idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{st: st, idle: idle, max: max, now: now}
}

// randomToken returns 32 random bytes, URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func cookieKey(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// create stores a session for row (kind, subject, token hash or role
// filled in by the caller) and returns the cookie value.
func (s *sessions) create(ctx context.Context, row *store.WebSession) (string, *session, error) {
	id := randomToken()
	now := s.now().UTC()
	row.ID, row.CookieHash, row.CSRF, row.CreatedAt, row.LastSeenAt = uuid.NewString(), cookieKey(id), randomToken(), now, now
	s.sweep(ctx, now)
	if err := s.st.CreateWebSession(ctx, row); err != nil {
		return "", nil, err
	}
	return id, &session{row: row, csrf: row.CSRF}, nil
}

// get returns the live session of cookie value id, touching it; an idle
// or too old session is deleted. A store failure is an error (the caller
// answers 503 rather than signing the browser out).
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	row, err := s.st.GetWebSessionByCookie(ctx, cookieKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	if s.expired(row, now) {
		_ = s.st.DeleteWebSession(ctx, row.ID)
		return nil, nil
	}
	if now.Sub(row.LastSeenAt) >= touchEvery {
		if err := s.st.TouchWebSession(ctx, row.ID, now); errors.Is(err, store.ErrNotFound) {
			return nil, nil // revoked meanwhile
		} else if err != nil {
			return nil, err
		}
		row.LastSeenAt = now
	}
	return &session{row: row, csrf: row.CSRF}, nil
}

func (s *sessions) expired(row *store.WebSession, now time.Time) bool {
	return now.Sub(row.LastSeenAt) >= s.idle || now.Sub(row.CreatedAt) >= s.max
}

func (s *sessions) remove(ctx context.Context, id string) {
	if row, err := s.st.GetWebSessionByCookie(ctx, cookieKey(id)); err == nil {
		_ = s.st.DeleteWebSession(ctx, row.ID)
	}
}

// sweep drops expired sessions at most every sweepEvery, so the table
// stays bounded by the sign-ins of the last SessionMax.
func (s *sessions) sweep(ctx context.Context, now time.Time) {
	s.mu.Lock()
	due := now.Sub(s.lastSweep) >= sweepEvery
	if due {
		s.lastSweep = now
	}
	s.mu.Unlock()
	if due {
		_, _ = s.st.DeleteExpiredWebSessions(ctx, now.Add(-s.idle), now.Add(-s.max))
	}
}

// secureCookies reports whether cookies get the Secure attribute: the
// request came over TLS, or the public URL is https (TLS ends at a proxy).
func (u *UI) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(u.d.PublicURL), "https://")
}

func (u *UI) setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secureCookies(r)})
}

// lookupResult says why a request has or lacks a session.
type lookupResult int

const (
	// noSession: no cookie, or one that names no live session.
	noSession lookupResult = iota
	// sessionOK: a live session.
	sessionOK
	// sessionUnknown: a cookie naming no live session (ended, expired,
	// revoked or never issued).
	sessionUnknown
	// sessionUnavailable: the check could not be made now (the client is
	// throttled, the database did not answer); the cookie is kept.
	sessionUnavailable
)

// currentSession resolves the request's session and its principal.
func (u *UI) currentSession(r *http.Request) (*session, auth.Principal, bool) {
	s, p, res := u.lookupSession(r)
	return s, p, res == sessionOK
}

// lookupSession resolves the request's session. A token session re-checks
// its token; a session whose token no longer authenticates is ended. A
// person's session is the principal mapped at sign-in.
func (u *UI) lookupSession(r *http.Request) (*session, auth.Principal, lookupResult) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, auth.Principal{}, noSession
	}
	if d := u.d.Auth.Throttled(r); d > 0 {
		// A client guessing cookies is throttled like one guessing tokens.
		return nil, auth.Principal{}, sessionUnavailable
	}
	ss, err := u.sessions.get(r.Context(), c.Value)
	if err != nil {
		u.log.Error("web: session lookup failed", "error", err)
		return nil, auth.Principal{}, sessionUnavailable
	}
	if ss == nil {
		return nil, auth.Principal{}, sessionUnknown
	}
	if ss.row.Kind == store.WebSessionPerson {
		return ss, auth.Principal{TokenID: ss.row.Subject, Label: ss.row.Name, Role: auth.Role(ss.row.Role),
			RoutingKey: ss.row.RoutingKey, Person: ss.row.Subject}, sessionOK
	}
	p, status, _ := u.d.Auth.AuthenticateHash(r.Context(), ss.row.TokenHash)
	switch status {
	case 0:
		return ss, p, sessionOK
	case http.StatusUnauthorized:
		_ = u.d.Store.DeleteWebSession(r.Context(), ss.row.ID)
		return nil, auth.Principal{}, sessionUnknown
	}
	return nil, auth.Principal{}, sessionUnavailable
}

// handler is a page handler of a signed-in caller.
type handler func(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal)

// authed runs h for a signed-in caller; others are sent to the sign-in
// page (GET) or refused (403 for any other method). Every non-GET request
// must carry the session's CSRF token in the form field "csrf".
func (u *UI) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, p, res := u.lookupSession(r)
		if res == sessionUnavailable {
			if d := u.d.Auth.Throttled(r); d > 0 {
				auth.SetRetryAfter(w, d)
				u.errorPage(w, r, http.StatusTooManyRequests, auth.ThrottledMessage(d))
				return
			}
			u.errorPage(w, r, http.StatusServiceUnavailable, "Sessions cannot be checked right now; try again shortly")
			return
		}
		if res != sessionOK {
			if res == sessionUnknown {
				// The session ended (revoked, expired) or never existed:
				// the browser drops its cookie too, and the unknown cookie
				// counts as one failed check of this client (a guesser is
				// throttled; a browser sends a stale cookie only once).
				u.setCookie(w, r, SessionCookie, "", "/", -1)
				u.d.Auth.Failed(r)
			}
			if r.Method == http.MethodGet {
				next := r.URL.Path
				if r.URL.RawQuery != "" {
					next += "?" + r.URL.RawQuery
				}
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(next), http.StatusSeeOther)
				return
			}
			u.errorPage(w, r, http.StatusForbidden, "Not signed in")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(s.csrf)) != 1 {
				u.errorPage(w, r, http.StatusForbidden, "Missing or invalid CSRF token: reload the page and try again")
				return
			}
		}
		h(w, r, s, p)
	}
}

// SessionBridge wraps the admin API so that a GET of an event stream without an
// Authorization header but with a live UI session cookie is authenticated
// as that session's principal (auth.WithSessionPrincipal). Only GET and
// HEAD are bridged, and auth.Require honours the bridged principal only
// for them, so a cookie can read (the live pages' event streams) but never
// change anything through the API.
func (u *UI) SessionBridge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Authorization") == "" && isStreamPath(r.URL.Path) {
			if _, p, ok := u.currentSession(r); ok {
				r = r.WithContext(auth.WithSessionPrincipal(r.Context(), p))
				// The browser opens these responses on this origin (an
				// artifact link, an error body): never sniffed into a
				// page, never framed.
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.Header().Set("X-Frame-Options", "DENY")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// isStreamPath reports whether path is one of the admin API's event
// streams or a run's artifact download, the only API routes a session
// cookie may read (the live pages and the job page's artifact links).
func isStreamPath(path string) bool {
	if !strings.HasPrefix(path, "/api/v1/admin/runs/") {
		return false
	}
	rest := strings.Split(strings.TrimPrefix(path, "/api/v1/admin/runs/"), "/")
	return strings.HasSuffix(path, "/events") || strings.HasSuffix(path, "/logs/stream") ||
		(len(rest) == 3 && rest[1] == "artifacts")
}

type loginData struct {
	Next  string
	Error string
	// Providers are the identity providers offered besides the token.
	Providers []providerButton
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.showLogin(w, r, http.StatusOK, "")
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	u.setCookie(w, r, loginCookie, tok, "/ui/login", 600)
	u.render(w, r, status, "login", view{Title: "Sign in", CSRF: tok,
		Data: loginData{Next: safeNext(r.FormValue("next")), Error: msg, Providers: u.providerButtons()}})
}

// safeNext keeps a post-sign-in destination only when it is a UI path on
// this origin (no open redirect), also once cleaned: "/ui/../api/..." is
// not a UI page.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") ||
		!strings.HasPrefix(path.Clean(strings.SplitN(next, "?", 2)[0])+"/", "/ui/") {
		return "/ui/runs"
	}
	return next
}

// login exchanges an admin token for a session. The form carries a
// double-submit token (cookie and field must match), so another site
// cannot sign a browser in with the attacker's token.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) != 1 {
		u.showLogin(w, r, http.StatusForbidden, "The sign-in form expired; try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		u.showLogin(w, r, http.StatusBadRequest, "Enter an admin token.")
		return
	}
	if d := u.d.Auth.Throttled(r); d > 0 {
		auth.SetRetryAfter(w, d)
		u.showLogin(w, r, http.StatusTooManyRequests, auth.ThrottledMessage(d)+".")
		return
	}
	hash := auth.Hash(token)
	_, status, msg := u.d.Auth.AuthenticateHash(r.Context(), hash)
	if status != 0 {
		if status == http.StatusUnauthorized {
			u.d.Auth.Failed(r)
		}
		u.showLogin(w, r, status, msg+".")
		return
	}
	p, _, _ := u.d.Auth.AuthenticateHash(r.Context(), hash)
	id, _, err := u.sessions.create(r.Context(), &store.WebSession{Kind: store.WebSessionToken, TokenHash: hash,
		Subject: p.Approver(), Name: p.Label, Client: auth.ClientAddr(r)})
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	u.setCookie(w, r, loginCookie, "", "/ui/login", -1)
	u.setCookie(w, r, SessionCookie, id, "/", 0)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		u.sessions.remove(r.Context(), c.Value)
	}
	u.setCookie(w, r, SessionCookie, "", "/", -1)
	http.Redirect(w, r, "/ui/login?flash=signed-out", http.StatusSeeOther)
}
