package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"kici.dev/kici/internal/store"
)

// Principal is the authenticated caller of an admin route.
type Principal struct {
	// TokenID is the admin token row id ("bootstrap" for a configured
	// bootstrap token, "direct" for kici-admin's direct-database mode).
	TokenID string
	// Label is the token's label.
	Label string
	// Role is owner, admin or auditor.
	Role Role
	// RoutingKey is the token's routing-key scope ("" = unscoped): a scoped
	// token only reaches resources carrying that key.
	RoutingKey string
	// Person is set for a person signed in to the web UI through an
	// identity provider: their identity (Identity.ID, e.g.
	// "gitea:alice"). TokenID then holds the same identity and Label
	// their display name, so the access log names the person.
	Person string
}

// Approver is the subject recorded on a held-run decision made by p: the
// person's identity, or "service:<token id>" for an admin token (KiCI's
// form for operator decisions).
func (p Principal) Approver() string {
	if p.Person != "" {
		return p.Person
	}
	return "service:" + p.TokenID
}

type principalKey struct{}

// PrincipalFrom returns the caller that AdminAuth.Require authenticated for
// this request.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// AdminAuth authenticates admin API requests by bearer token and enforces
// the role × permission matrix (see docs/kici-compatibility.md#admin-api).
type AdminAuth struct {
	st        store.Store
	bootstrap [][]byte
	// bootstrapAs is who a bootstrap token's caller is.
	bootstrapAs Principal
	now         func() time.Time
	// failures throttles failed token checks per client address
	// (throttle.go); nil throttles nothing.
	failures *FailureLimiter
}

// NewAdminAuth returns an AdminAuth backed by st. Each non-empty entry of
// bootstrapTokens (e.g. KICI_BOOTSTRAP_ADMIN_TOKEN) is accepted as an owner
// token; it is compared in constant time and never stored.
func NewAdminAuth(st store.Store, bootstrapTokens []string) *AdminAuth {
	a := &AdminAuth{st: st, now: func() time.Time { return time.Now().UTC() },
		bootstrapAs: Principal{TokenID: "bootstrap", Label: "bootstrap", Role: RoleOwner},
		failures:    NewFailureLimiter(DefaultFailureBurst, DefaultFailureInterval)}
	for _, t := range bootstrapTokens {
		if t != "" {
			a.bootstrap = append(a.bootstrap, []byte(t))
		}
	}
	return a
}

// InProcessOwner returns an AdminAuth backed by st that accepts token (an
// in-memory secret of the calling process, never stored) as an owner
// recorded in the access log and on decisions with the given token id and
// label instead of "bootstrap" — e.g. "direct" and "direct: alice@build-1"
// for kici-admin's direct-database mode, so its writes say who made them.
func InProcessOwner(st store.Store, token, id, label string) *AdminAuth {
	a := NewAdminAuth(st, []string{token})
	a.bootstrapAs = Principal{TokenID: id, Label: label, Role: RoleOwner}
	return a
}

// Error bodies of the admin middleware, word for word KiCI's
// (see docs/kici-compatibility.md#admin-api).
const (
	msgMissingAuth  = "Missing authorization"
	msgInvalidToken = "Invalid or expired token"
	msgAuthDown     = "Authentication unavailable"
)

// errAuthUnavailable marks a store failure during token lookup.
var errAuthUnavailable = errors.New("authentication unavailable")

// Authenticate resolves an Authorization header value to a principal. It
// returns (principal, 0, "") on success, else the HTTP status (401 or 503)
// and the error message for the JSON body.
func (a *AdminAuth) Authenticate(ctx context.Context, header string) (Principal, int, string) {
	token, ok := bearerToken(header)
	if !ok {
		return Principal{}, http.StatusUnauthorized, msgMissingAuth
	}
	return a.AuthenticateHash(ctx, Hash(token))
}

// Require wraps h so that it runs only for a caller holding perm:
//   - no "Authorization: Bearer <token>" header ⇒ 401 {"error":"Missing authorization"}
//   - unknown, revoked or expired token ⇒ 401 {"error":"Invalid or expired token"}
//   - the token lookup failed (store down) ⇒ 503 {"error":"Authentication unavailable"}
//   - role lacks perm ⇒ 403 {"error":"Role \"<role>\" does not have permission \"<perm>\""}
//   - the client's address failed too many token checks lately (Throttled)
//     ⇒ 429 with Retry-After, before its token is looked at
//
// Authentication fails closed: h is never reached on any of these. The
// caller is available to h through PrincipalFrom. Require panics when perm
// is not in the permission matrix, so a mistyped gate fails at start-up
// rather than silently denying (or allowing) everything.
func (a *AdminAuth) Require(perm Permission, h http.Handler) http.Handler {
	if !IsPermission(perm) {
		panic(fmt.Sprintf("auth: unknown permission %q", perm))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := a.Throttled(r); d > 0 {
			TooManyFailures(w, d)
			return
		}
		p, status, msg := a.authenticateRequest(r)
		if status != 0 {
			if status == http.StatusUnauthorized && msg == msgInvalidToken {
				a.Failed(r)
			}
			writeError(w, status, msg)
			return
		}
		if !HasPermission(p.Role, perm) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("Role %q does not have permission %q", p.Role, perm))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// authenticateRequest authenticates r by its Authorization header or, for a
// safe method without one, by a principal a web session put on the
// context (WithSessionPrincipal), which was resolved from the same token
// table on this request.
func (a *AdminAuth) authenticateRequest(r *http.Request) (Principal, int, string) {
	h := r.Header.Get("Authorization")
	if h == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if p, ok := r.Context().Value(sessionPrincipalKey{}).(Principal); ok {
			return p, 0, ""
		}
	}
	return a.Authenticate(r.Context(), h)
}

// Throttled reports how long r's client must wait before its next token
// check (too many recent failures), 0 when it may check now. Every route
// that checks a token the caller presents asks first.
func (a *AdminAuth) Throttled(r *http.Request) time.Duration {
	return a.failures.RetryAfter(ClientAddr(r))
}

// Failed records a failed token check by r's client.
func (a *AdminAuth) Failed(r *http.Request) { a.failures.Fail(ClientAddr(r)) }

type sessionPrincipalKey struct{}

// WithSessionPrincipal returns ctx carrying p as the caller authenticated
// by a web UI session (package web). Require accepts it only on GET and
// HEAD requests without an Authorization header: the UI's live pages read
// the admin API's event streams with the session cookie, while every
// state-changing route still needs a bearer token (or the UI's own
// CSRF-checked forms).
func WithSessionPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, sessionPrincipalKey{}, p)
}

// AuthenticateHash resolves a token known only by its Hash (a web session
// keeps the hash, never the plaintext) with the same rules as
// Authenticate: it returns (principal, 0, "") on success, else 401 with
// "Invalid or expired token" (unknown, revoked, expired) or 503 when the
// lookup failed. It is called on every request of a session, so a revoked
// or expired token ends its sessions at once.
func (a *AdminAuth) AuthenticateHash(ctx context.Context, hash string) (Principal, int, string) {
	p, err := a.lookupHash(ctx, hash)
	switch {
	case err == nil:
		return p, 0, ""
	case errors.Is(err, errAuthUnavailable):
		return Principal{}, http.StatusServiceUnavailable, msgAuthDown
	default:
		return Principal{}, http.StatusUnauthorized, msgInvalidToken
	}
}

func (a *AdminAuth) lookupHash(ctx context.Context, hash string) (Principal, error) {
	for _, b := range a.bootstrap {
		if subtle.ConstantTimeCompare([]byte(Hash(string(b))), []byte(hash)) == 1 {
			return a.bootstrapAs, nil
		}
	}
	t, err := a.st.GetAdminTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errors.New("unknown token")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", errAuthUnavailable, err)
	}
	if t.Revoked {
		return Principal{}, errors.New("token revoked")
	}
	if t.ExpiresAt != nil && !t.ExpiresAt.After(a.now()) {
		return Principal{}, errors.New("token expired")
	}
	if !IsRole(Role(t.Role)) {
		return Principal{}, errors.New("token has an unknown role")
	}
	return Principal{TokenID: t.ID, Label: t.Label, Role: Role(t.Role), RoutingKey: t.RoutingKey}, nil
}

// bearerToken extracts the token from "Bearer <token>" (scheme matched
// case-insensitively, surrounding blanks trimmed).
func bearerToken(header string) (string, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok := strings.TrimSpace(rest)
	return tok, tok != ""
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// IssueAdminToken creates an admin token with role (owner, admin or auditor)
// and label; ttl <= 0 means it never expires. It returns the plaintext
// ("kadm_" + 64 hex, shown once) and the stored row.
func (a *AdminAuth) IssueAdminToken(ctx context.Context, label string, role Role, ttl time.Duration) (string, *store.AdminToken, error) {
	if !IsRole(role) {
		return "", nil, fmt.Errorf("auth: unknown role %q (want owner, admin or auditor)", role)
	}
	plain := NewAdminTokenPlaintext()
	now := a.now()
	t := &store.AdminToken{
		ID:        uuid.NewString(),
		Label:     label,
		Role:      string(role),
		TokenHash: Hash(plain),
		CreatedAt: now,
	}
	if ttl > 0 {
		exp := now.Add(ttl)
		t.ExpiresAt = &exp
	}
	if err := a.st.CreateAdminToken(ctx, t); err != nil {
		return "", nil, fmt.Errorf("auth: store admin token: %w", err)
	}
	return plain, t, nil
}

// EnsureOwnerToken creates a new non-expiring owner token labelled label and
// returns its plaintext (the embedded default writes it to
// <data>/admin-token). Every call creates a new token.
func (a *AdminAuth) EnsureOwnerToken(ctx context.Context, label string) (string, error) {
	plain, _, err := a.IssueAdminToken(ctx, label, RoleOwner, 0)
	return plain, err
}
