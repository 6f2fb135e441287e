package web

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"unicode/utf8"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/auth/idp"
	"kici.dev/kici/internal/store"
)

// pendingCookie carries an identity-provider sign-in between leaving for
// the provider and its callback (idp.Pending: state, nonce, PKCE
// verifier). It lives in the browser, not in a node's memory, so the
// callback may reach any node. SameSite=Lax: the callback is a top-level
// navigation from the provider's site, which a Strict cookie would miss.
const pendingCookieBase = "kici_signin"

// pendingMaxAge is how long a sign-in may take at the provider (seconds).
const pendingMaxAge = 600

// SignIn is the identity-provider sign-in of the web UI: the providers
// offered on the sign-in page and the role map deciding who may sign in
// with which role.
type SignIn struct {
	Providers []*idp.Provider
	Roles     *auth.RoleMap
}

func (u *UI) provider(name string) *idp.Provider {
	if u.d.SignIn == nil {
		return nil
	}
	for _, p := range u.d.SignIn.Providers {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// providerButton is one "Sign in with …" link of the sign-in page.
type providerButton struct{ Name, Label string }

func (u *UI) providerButtons() []providerButton {
	var out []providerButton
	if u.d.SignIn != nil {
		for _, p := range u.d.SignIn.Providers {
			out = append(out, providerButton{Name: p.Name(), Label: p.Label()})
		}
	}
	return out
}

// signInStart sends the browser to the provider's authorization endpoint
// with fresh state, nonce and PKCE challenge.
func (u *UI) signInStart(w http.ResponseWriter, r *http.Request) {
	p := u.provider(r.PathValue("provider"))
	if p == nil {
		u.showLogin(w, r, http.StatusNotFound, "No such sign-in provider.")
		return
	}
	pend := idp.NewPending(p.Name(), safeNext(r.FormValue("next")))
	dest, err := p.AuthURL(r.Context(), pend)
	if err != nil {
		u.log.Error("web: sign-in provider unavailable", "provider", p.Name(), "error", err)
		u.showLogin(w, r, http.StatusBadGateway, "Sign-in with "+p.Name()+" is unavailable right now (the provider could not be reached); try again later or ask an operator.")
		return
	}
	b, _ := json.Marshal(pend)
	u.setPending(w, r, p.Name(), base64.RawURLEncoding.EncodeToString(b), pendingMaxAge)
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

// signInCallback finishes a provider sign-in: the state must match the
// browser's pending sign-in, the code is exchanged (with the PKCE
// verifier; OIDC: the ID token and its nonce are validated), the identity
// is mapped to a role, and a session is stored. Failures count against
// the client like wrong tokens.
func (u *UI) signInCallback(w http.ResponseWriter, r *http.Request) {
	p := u.provider(r.PathValue("provider"))
	if p == nil {
		u.showLogin(w, r, http.StatusNotFound, "No such sign-in provider.")
		return
	}
	if d := u.d.Auth.Throttled(r); d > 0 {
		auth.SetRetryAfter(w, d)
		u.showLogin(w, r, http.StatusTooManyRequests, auth.ThrottledMessage(d)+".")
		return
	}
	u.setPending(w, r, p.Name(), "", -1)
	var pend idp.Pending
	name, _ := u.pendingCookie(r, p.Name())
	c, err := r.Cookie(name)
	if err == nil {
		b, derr := base64.RawURLEncoding.DecodeString(c.Value)
		err = errors.Join(derr, json.Unmarshal(b, &pend))
	}
	state := r.FormValue("state")
	if err != nil || pend.Provider != p.Name() || state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(pend.State)) != 1 {
		u.d.Auth.Failed(r)
		u.showLogin(w, r, http.StatusBadRequest, "This sign-in expired or was not started in this browser; try again.")
		return
	}
	if e := r.FormValue("error"); e != "" {
		u.showLogin(w, r, http.StatusForbidden, fmt.Sprintf("%s refused the sign-in (%s).", p.Name(), clip(e, 100)))
		return
	}
	id, err := p.Finish(r.Context(), r.FormValue("code"), pend)
	if err != nil {
		u.d.Auth.Failed(r)
		u.log.Warn("web: sign-in failed", "provider", p.Name(), "client", auth.ClientAddr(r), "error", err)
		status, msg := http.StatusBadGateway, "Sign-in with "+p.Name()+" failed: the provider could not be reached; try again later."
		if errors.Is(err, idp.ErrDenied) {
			status, msg = http.StatusUnauthorized, "Sign-in with "+p.Name()+" failed; try again."
		}
		u.showLogin(w, r, status, msg)
		return
	}
	role, rk, ok := u.d.SignIn.Roles.Resolve(id)
	if !ok {
		u.refused(w, r, id)
		return
	}
	row := &store.WebSession{Kind: store.WebSessionPerson, Subject: id.ID(), Name: clip(id.Display(), 200), Role: string(role), RoutingKey: rk,
		Client: auth.ClientAddr(r)}
	cookie, _, err := u.sessions.create(r.Context(), row)
	if err != nil {
		u.internalError(w, r, err)
		return
	}
	if err := u.d.Store.AppendAccessLog(r.Context(), &store.AccessLogEntry{TokenID: row.Subject, TokenLabel: row.Name, Role: string(role),
		RoutingKey: rk, Action: "web.sign_in", Resource: "web_session:" + row.ID, Detail: row.Subject + " via " + p.Name()}); err != nil {
		u.log.Error("web: access log write failed", "action", "web.sign_in", "error", err)
	}
	u.setCookie(w, r, SessionCookie, cookie, "/", 0)
	// A page of this origin moves on: the session cookie is SameSite
	// Strict, and a redirect chain that began at the provider would not
	// send it.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// pend.Next passed safeNext (a /ui/ path of this origin); it is
	// HTML-escaped into both attributes.
	next := template.HTMLEscapeString(safeNext(pend.Next))
	_, _ = fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s">
<title>Signed in · kici</title></head>
<body><p>Signed in. <a id="continue" href="%s">Continue</a></p></body></html>
`, next, next)
}

// pendingCookie is the pending sign-in cookie's name and path. Over
// https it is "__Host-kici_signin" on "/": the browser then refuses it
// from a sibling subdomain (cookie tossing), so nobody can plant their own
// state and code in another's browser (login CSRF). Over plain http (a
// local orchestrator) it is scoped to the provider's sign-in path.
func (u *UI) pendingCookie(r *http.Request, provider string) (name, path string) {
	if u.secureCookies(r) {
		return "__Host-" + pendingCookieBase, "/"
	}
	return pendingCookieBase, "/ui/login/" + provider + "/"
}

func (u *UI) setPending(w http.ResponseWriter, r *http.Request, provider, value string, maxAge int) {
	name, path := u.pendingCookie(r, provider)
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: u.secureCookies(r)})
}

// refused answers a person whom no role rule matches: who they are, and
// what an operator would add.
func (u *UI) refused(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	msg := fmt.Sprintf("You signed in as %s (%s), but no role is mapped to this identity, so you may not use kici. "+
		"Ask an operator to add %q", clip(id.Display(), 200), id.ID(), id.ID())
	if len(id.Groups) > 0 {
		msg += fmt.Sprintf(" or one of your groups (%s)", clip(strings.Join(id.Groups, ", "), 400))
	}
	msg += " to the roles of the sign-in configuration (KICI_WEB_SIGNIN_CONFIG)."
	u.log.Info("web: sign-in refused: no role mapped", "identity", id.ID(), "client", auth.ClientAddr(r))
	u.render(w, r, http.StatusForbidden, "error", view{Title: "Not allowed", Data: map[string]any{"Status": http.StatusForbidden, "Message": msg}})
}

// clip shortens s to at most n bytes (on a rune boundary).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
