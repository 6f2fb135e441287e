// Package web is kici's web UI, served by kici-orchestrator under /ui/:
// server-rendered HTML (html/template) from templates and assets embedded
// in the binary, with a small hand-written script (static/live.js) only
// for the live parts; every list and action works without JavaScript.
//
// A browser signs in with an admin token, exchanged for a server-side
// session (session.go). Every page and action checks the session's
// principal against the same role × permission table and routing-key
// scope rules as the admin API (package auth), and calls the same services
// the admin API calls (run control, reruns, held-run decisions), never the
// API over HTTP. Every string that comes from a repository, a webhook or a
// log is rendered through html/template's contextual escaping, so it is
// inert; the Content-Security-Policy allows no inline script besides.
package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/dispatch"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/scaler"
	"kici.dev/kici/internal/store"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Prefix is the path under which the UI is served.
const Prefix = "/ui/"

// RunCanceller cancels a run (runctl.Controller.CancelRun): the run's
// status afterwards; runctl.ErrRunNotFound, runctl.ErrRunTerminal.
type RunCanceller interface {
	CancelRun(ctx context.Context, runID string, force bool, by string) (string, error)
}

// Rerunner creates a rerun of a finished run: all of its jobs
// (ingest.Processor.Rerun) or only those that did not succeed and their
// dependents (ingest.Processor.RerunFailed).
type Rerunner interface {
	Rerun(ctx context.Context, runID, by string) (*store.Run, error)
	RerunFailed(ctx context.Context, runID, by string) (*store.Run, error)
}

// HoldDecider decides a held run (approval.Decider.Decide).
type HoldDecider interface {
	Decide(ctx context.Context, d approval.Decision) (approval.Result, error)
}

// Deps are the UI's collaborators. Store, Auth and Logs are required; a
// nil service hides its action or page section.
type Deps struct {
	Store store.Store
	Auth  *auth.AdminAuth
	Logs  LogSource

	Cancel   RunCanceller
	Rerun    Rerunner
	Approval HoldDecider

	// Agents lists the connected agents (dispatch.Dispatcher.Agents).
	Agents func() []dispatch.AgentInfo
	// Scalers returns the scaler pools (scaler.Manager.Status).
	Scalers func() scaler.Status
	// Settings reads the cluster settings.
	Settings *cluster.Reader
	// Drain returns the drain state (runctl.Controller.Drain).
	Drain func() runctl.DrainStatus
	// Ready is the readiness check of GET /ready (nil = ready).
	Ready func(ctx context.Context) error

	// Version and Mode (KICI_MODE) are shown on the settings page; in a
	// Platform-connected mode held runs are decided on the Platform.
	Version string
	Mode    config.Mode
	// PublicURL (KICI_PUBLIC_URL) is the address browsers use; an https
	// URL marks the session cookie Secure even behind a TLS-terminating
	// proxy.
	PublicURL string

	// SessionIdle ends a session unused this long (default 30 min);
	// SessionMax ends any session this long after sign-in (default 12 h).
	SessionIdle, SessionMax time.Duration

	// SignIn offers sign-in through identity providers (nil = admin
	// tokens only).
	SignIn *SignIn

	Logger *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// UI serves the pages. Create it with New and mount it with Mount.
type UI struct {
	d        Deps
	log      *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	static   http.Handler
}

// New parses the embedded templates and returns the UI.
func New(d Deps) (*UI, error) {
	if d.Store == nil || d.Auth == nil || d.Logs == nil {
		return nil, fmt.Errorf("web: Store, Auth and Logs are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.SessionIdle <= 0 {
		d.SessionIdle = 30 * time.Minute
	}
	if d.SessionMax <= 0 {
		d.SessionMax = 12 * time.Hour
	}
	u := &UI{d: d, log: d.Logger, pages: map[string]*template.Template{}}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	u.sessions = newSessions(d.Store, d.SessionIdle, d.SessionMax, d.Now)
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", n, err)
		}
		u.pages[base] = t
	}
	sub, _ := fs.Sub(assets, "static")
	u.static = http.StripPrefix(Prefix+"static/", http.FileServer(http.FS(sub)))
	return u, nil
}

// Mount registers every /ui/ route on mux.
func (u *UI) Mount(mux *http.ServeMux) {
	h := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, u.secure(f)) }
	h("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/runs", http.StatusSeeOther) })
	h("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/runs", http.StatusSeeOther) })
	h("GET /ui/static/", func(w http.ResponseWriter, r *http.Request) {
		// The assets are files only: no directory listing.
		if strings.HasSuffix(r.URL.Path, "/") {
			u.errorPage(w, r, http.StatusNotFound, "Page not found")
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		u.static.ServeHTTP(w, r)
	})
	h("GET /ui/login", u.loginPage)
	h("POST /ui/login", u.login)
	h("GET /ui/login/{provider}", u.signInStart)
	h("GET /ui/login/{provider}/callback", u.signInCallback)
	h("POST /ui/logout", u.authed(u.logout))
	h("GET /ui/runs", u.authed(u.runsPage))
	h("GET /ui/runs/{runId}", u.authed(u.runPage))
	h("POST /ui/runs/{runId}/cancel", u.authed(u.cancelRun))
	h("POST /ui/runs/{runId}/rerun", u.authed(u.rerunRun))
	h("GET /ui/runs/{runId}/jobs/{jobId}", u.authed(u.jobPage))
	h("GET /ui/runs/{runId}/jobs/{jobId}/steps/{i}/raw", u.authed(u.rawLog))
	h("GET /ui/held", u.authed(u.heldPage))
	h("POST /ui/held/{id}/decision", u.authed(u.decideHold))
	h("GET /ui/sources", u.authed(u.sourcesPage))
	h("GET /ui/agents", u.authed(u.agentsPage))
	h("GET /ui/notifications", u.authed(u.notificationsPage))
	h("GET /ui/settings", u.authed(u.settingsPage))
	// Status badges check the session themselves: public when the
	// operator says so (cluster setting publicBadges).
	h("GET /ui/badge/{source}/{workflow...}", u.badge)
	h("/ui/", func(w http.ResponseWriter, r *http.Request) { u.errorPage(w, r, http.StatusNotFound, "Page not found") })
}

// ContentSecurityPolicy is sent with every UI response: scripts, styles,
// images and connections only from this origin, no inline script or style,
// no plugins, no framing, forms only to this origin.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the security headers of every UI response.
func (u *UI) secure(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		if hd.Get("Cache-Control") == "" {
			hd.Set("Cache-Control", "no-store")
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				u.log.Error("web: panic", "path", r.URL.Path, "panic", v)
				u.errorPage(w, r, http.StatusInternalServerError, "Internal server error")
			}
		}()
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		}
		h(w, r)
	})
}

// view is the data every page template receives.
type view struct {
	Title string
	Nav   string
	// Who is the signed-in caller; zero on the sign-in page.
	Who  auth.Principal
	CSRF string
	// Live names the live behaviour of live.js for this page ("" = none).
	Live string
	// LiveURL is the event stream (or fragment) the page follows.
	LiveURL string
	Version string
	Flash   string
	Data    any
}

// render writes page name with status. A request carrying
// "X-Kici-Fragment: main" gets only the page's main block (live.js swaps
// it in place), rendered by the same template, so it is escaped the same
// way.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	t := u.pages[name]
	if t == nil {
		http.Error(w, "missing template", http.StatusInternalServerError)
		return
	}
	v.Version = u.d.Version
	if v.Flash == "" {
		v.Flash = flashMessage(r.URL.Query().Get("flash"))
	}
	block := "layout"
	if r.Header.Get("X-Kici-Fragment") == "main" {
		block = "main"
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, block, v); err != nil {
		u.log.Error("web: render", "page", name, "error", err)
		http.Error(w, "Internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// errorPage renders a plain error page.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := view{Title: http.StatusText(status), Data: map[string]any{"Status": status, "Message": msg}}
	if s, p, ok := u.currentSession(r); ok {
		v.Who, v.CSRF = p, s.csrf
	}
	u.render(w, r, status, "error", v)
}

// flashes are the fixed notices a redirect may name with ?flash=; the
// value is a key, never text to display, so a link cannot put words on a
// page.
var flashes = map[string]string{
	"cancelled":  "Cancellation requested.",
	"rerun":      "Rerun created.",
	"approved":   "Decision recorded: approved.",
	"rejected":   "Decision recorded: rejected.",
	"signed-out": "Signed out.",
	"expired":    "Your session ended; sign in again.",
}

func flashMessage(key string) string { return flashes[key] }
