package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"kici.dev/kici/internal/api"
	"kici.dev/kici/internal/auth"
)

// The live pages read the admin API's event streams with the session
// cookie; the cookie opens nothing else of the API, and never a write.
func TestSessionCookieReadsEventStreamsOnly(t *testing.T) {
	h := newHarness(t)
	mux := api.NewRouter(api.Deps{Store: h.st, Auth: h.auth, Logs: h.logs})
	h.ui.Mount(mux)
	srv := httptest.NewServer(h.ui.SessionBridge(mux))
	defer srv.Close()
	h.srv.Config.Handler = srv.Config.Handler // sign in through the same stack
	c := h.client()
	c.signIn(h.tokens[auth.RoleAuditor])
	u, _ := http.NewRequest("GET", srv.URL, nil)
	cookies := c.hc.Jar.Cookies(u.URL)
	if len(cookies) == 0 {
		t.Fatal("no session cookie")
	}
	do := func(method, path string) int {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 401 && (resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY") {
			t.Errorf("%s %s through the session: headers %v", method, path, resp.Header)
		}
		if method == "GET" && resp.StatusCode == 200 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return 200 // the stream itself is not read to its end
		}
		return resp.StatusCode
	}
	stream := "/api/v1/admin/runs/" + h.runID + "/jobs/" + h.jobIDs[0] + "/steps/0/logs/stream"
	for path, want := range map[string]int{
		"GET " + stream: 200,
		"GET /api/v1/admin/runs/" + h.runID + "/events":         200,
		"GET /api/v1/admin/runs/" + h.runID + "/artifacts/nope": 503, // no artifact store here; the headers still count
		"GET /api/v1/admin/runs":                                401,
		"POST /api/v1/admin/runs/" + h.runID + "/cancel":        401,
		"POST /api/v1/admin/held-runs/decision":                 401,
	} {
		method, p, _ := strings.Cut(path, " ")
		if got := do(method, p); got != want {
			t.Errorf("%s with a session cookie = %d, want %d", path, got, want)
		}
	}
}
