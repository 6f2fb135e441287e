package web

import (
	"net/http"
	"testing"

	"kici.dev/kici/internal/auth"
)

// A step index the job does not have is a 404 on the job page and on the
// raw download, not an empty log that looks like a step without output.
func TestUnknownStepIsNotFound(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	for _, p := range []string{h.jobURL(0) + "?step=2", h.jobURL(0) + "?step=99", h.jobURL(0) + "/steps/2/raw", h.jobURL(0) + "/steps/99/raw"} {
		code, body, resp := c.get(p)
		if code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
		mustContain(t, p, body, "Step not found")
		if resp.Header.Get("Content-Disposition") != "" || resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
			t.Errorf("GET %s: headers %v", p, resp.Header)
		}
	}
	for _, p := range []string{h.jobURL(0) + "?step=1", h.jobURL(0) + "?step=-1", h.jobURL(0) + "/steps/1/raw", h.jobURL(0) + "/steps/-1/raw"} {
		if code, _, _ := c.get(p); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, code)
		}
	}
}

// The embedded assets are served as files; their directory is not listed.
func TestStaticDirectoryIsNotListed(t *testing.T) {
	h := newHarness(t)
	c := h.client()
	code, body, resp := c.get("/ui/static/")
	if code != http.StatusNotFound || resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Fatalf("GET /ui/static/: %d %v", code, resp.Header)
	}
	mustNotContain(t, "static dir", body, `href="live.js"`, `href="kici.css"`)
	if code, _, _ := c.get("/ui/static/live.js"); code != http.StatusOK {
		t.Fatalf("GET live.js: %d", code)
	}
}
