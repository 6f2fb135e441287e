package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"kici.dev/kici/internal/auth"
)

// Cookie names. The session cookie's path is "/" so that the live pages
// can read the admin API's event streams with it; the sign-in cookie (the
// double-submit CSRF value of the sign-in form) is scoped to the form.
const (
	SessionCookie = "kici_session"
	loginCookie   = "kici_login"
	csrfField     = "csrf"
)

// session is one signed-in browser. The admin token itself is never kept:
// only its hash, which is resolved against the token table on every
// request, so revoking or expiring the token ends the session at once.
type session struct {
	tokenHash string
	csrf      string
	created   time.Time
	lastSeen  time.Time
}

// sessions is the server-side session table, keyed by the SHA-256 of the
// cookie value (a copy of the table alone lets no one sign in).
type sessions struct {
	mu        sync.Mutex
	byID      map[string]*session
	idle, max time.Duration
	now       func() time.Time
}

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, idle: idle, max: max, now: now}
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

// create starts a session for tokenHash and returns the cookie value.
func (s *sessions) create(tokenHash string) (string, *session) {
	id := randomToken()
	now := s.now()
	ss := &session{tokenHash: tokenHash, csrf: randomToken(), created: now, lastSeen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	s.byID[cookieKey(id)] = ss
	return id, ss
}

// get returns the live session of cookie value id, touching it; an idle
// or too old session is removed.
func (s *sessions) get(id string) (*session, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := cookieKey(id)
	ss, ok := s.byID[k]
	if !ok {
		return nil, false
	}
	if s.expired(ss, now) {
		delete(s.byID, k)
		return nil, false
	}
	ss.lastSeen = now
	return ss, true
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.lastSeen) >= s.idle || now.Sub(ss.created) >= s.max
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, cookieKey(id))
}

// sweepLocked drops expired sessions, so the table stays bounded by the
// sign-ins of the last SessionMax.
func (s *sessions) sweepLocked(now time.Time) {
	for k, ss := range s.byID {
		if s.expired(ss, now) {
			delete(s.byID, k)
		}
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

// currentSession resolves the request's session and its principal,
// re-checking the token; a session whose token no longer authenticates is
// ended.
func (u *UI) currentSession(r *http.Request) (*session, auth.Principal, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, auth.Principal{}, false
	}
	ss, ok := u.sessions.get(c.Value)
	if !ok {
		return nil, auth.Principal{}, false
	}
	p, status, _ := u.d.Auth.AuthenticateHash(r.Context(), ss.tokenHash)
	if status != 0 {
		if status == http.StatusUnauthorized {
			u.sessions.remove(c.Value)
		}
		return nil, auth.Principal{}, false
	}
	return ss, p, true
}

// handler is a page handler of a signed-in caller.
type handler func(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal)

// authed runs h for a signed-in caller; others are sent to the sign-in
// page (GET) or refused (403 for any other method). Every non-GET request
// must carry the session's CSRF token in the form field "csrf".
func (u *UI) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, p, ok := u.currentSession(r)
		if !ok {
			if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
				// The session ended (revoked token, expiry): the browser
				// drops its cookie too.
				u.setCookie(w, r, SessionCookie, "", "/", -1)
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
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.showLogin(w, r, http.StatusOK, "")
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	u.setCookie(w, r, loginCookie, tok, "/ui/login", 600)
	u.render(w, r, status, "login", view{Title: "Sign in", CSRF: tok,
		Data: loginData{Next: safeNext(r.FormValue("next")), Error: msg}})
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
	id, _ := u.sessions.create(hash)
	u.setCookie(w, r, loginCookie, "", "/ui/login", -1)
	u.setCookie(w, r, SessionCookie, id, "/", 0)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, s *session, p auth.Principal) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		u.sessions.remove(c.Value)
	}
	u.setCookie(w, r, SessionCookie, "", "/", -1)
	http.Redirect(w, r, "/ui/login?flash=signed-out", http.StatusSeeOther)
}
