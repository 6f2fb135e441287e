package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/auth"
	"kici.dev/kici/internal/cluster"
)

// checkBadge asserts a badge answer: status, an SVG that is never cached,
// and the words it shows.
func checkBadge(t *testing.T, c *client, path string, wantCode int, wants ...string) string {
	t.Helper()
	code, body, resp := c.get(path)
	if code != wantCode {
		t.Fatalf("GET %s: %d, want %d: %s", path, code, wantCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "image/svg+xml; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-cache") || !strings.Contains(cc, "no-store") {
		t.Errorf("GET %s: Cache-Control %q", path, cc)
	}
	if !strings.HasPrefix(body, `<svg xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("GET %s: not an SVG: %s", path, body)
	}
	mustContain(t, path, body, wants...)
	return body
}

// A badge is private by default: a caller who is not signed in gets a
// "sign in" badge with 401; a signed-in reader gets the newest run's
// status on the branch. Names are escaped.
func TestBadgePrivateByDefault(t *testing.T) {
	h := newHarness(t)
	anon := h.client()
	checkBadge(t, anon, "/ui/badge/app/ci.svg?branch=main", http.StatusUnauthorized, ">sign in<")
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	checkBadge(t, c, "/ui/badge/app/ci.svg?branch=main", http.StatusOK, ">ci<", ">running<", "ci: running")
	checkBadge(t, c, "/ui/badge/src-1/ci.svg", http.StatusOK, ">running<")
	checkBadge(t, c, "/ui/badge/app/ci.svg?branch=release", http.StatusOK, ">no runs<")
	checkBadge(t, c, "/ui/badge/nosuch/ci.svg", http.StatusNotFound, ">unknown<")
	body := checkBadge(t, c, "/ui/badge/app/%3Cscript%3Ealert(1)%3C%2Fscript%3E.svg", http.StatusOK, "&lt;script&gt;alert(1)&lt;/script&gt;", ">no runs<")
	mustNotContain(t, "escaped badge", body, "<script>")
	if code, _, _ := c.get("/ui/badge/app/ci.png"); code != http.StatusNotFound {
		t.Errorf("a badge that is not .svg: %d", code)
	}
}

// With cluster setting publicBadges = 1 anyone gets the badge.
func TestBadgePublicWhenEnabled(t *testing.T) {
	var settings *cluster.Reader
	h := newHarness(t, func(d *Deps) {
		settings = cluster.NewReader(d.Store, nil, time.Millisecond, nil)
		d.Settings = settings
	})
	if _, err := h.st.PatchClusterSettings(context.Background(), map[string]int64{cluster.PublicBadges: 1}, nil); err != nil {
		t.Fatal(err)
	}
	settings.Invalidate()
	checkBadge(t, h.client(), "/ui/badge/app/ci.svg?branch=main", http.StatusOK, ">running<")
}
